// A PLACEHOLDER on the os-lifecycle branch only, so that the lifecycle front links: every
// execd call answers 501 NOT_SUPPORTED, with its own X-Request-ID as the real one sets it.
// The execd helper's branch (os-execd) has the real file; at the merge the lead takes that
// one and drops this.
#include "front/opensandbox/execd/execd_routes.hpp"

#include "front/opensandbox/replies.hpp"

namespace dockgate::sidecar::opensandbox::execd {

http_reply serve(session_core&, const http_request& r, const std::string&, std::string_view) {
  http_reply reply = error(501, "NOT_SUPPORTED", "execd API: not served on this branch yet");
  reply.headers.push_back({"X-Request-ID", request_id_of(r)});
  return reply;
}

}  // namespace dockgate::sidecar::opensandbox::execd
