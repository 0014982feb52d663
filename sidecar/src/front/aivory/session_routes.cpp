// The sessions' routes of the Aivory front.
#include "front/aivory/routes.hpp"

namespace dockgate::sidecar::aivory {

http_reply create_session(session_core& core, const http_request& r, std::string_view) {
  return core.lifecycle.create_session(r);
}

http_reply delete_session(session_core& core, const http_request& r, std::string_view id) {
  return core.lifecycle.delete_session(id, r.body);
}

}  // namespace dockgate::sidecar::aivory
