#pragma once
// The Aivory sidecar's answer shapes: a refusal of the core as {"detail": message} with
// the status the Aivory sidecar gives that kind; a request field's validation error in
// FastAPI's 422 shape (request.hpp). Internal to the sidecar library.

#include "front/http_server.hpp"
#include "front/request.hpp"
#include "util/refusal.hpp"

namespace dockgate::sidecar::aivory {

inline unsigned status_of(refusal_kind k) {
  switch (k) {
    case refusal_kind::invalid:
      return 400;
    case refusal_kind::not_found:
      return 404;
    case refusal_kind::too_large:
      return 413;
    case refusal_kind::busy:
      return 429;
    case refusal_kind::conflict:
      return 409;
    case refusal_kind::unavailable:
      return 503;
    case refusal_kind::engine_failed:
      return 502;
    case refusal_kind::failed:
      return 500;
  }
  return 500;
}

inline http_reply reply(const refusal& r) {
  return detail(status_of(r.kind), r.message);
}

}  // namespace dockgate::sidecar::aivory
