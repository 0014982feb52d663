// The cells' routes of the Aivory front.
#include "front/aivory/routes.hpp"

namespace dockgate::sidecar::aivory {

http_reply exec(session_core& core, const http_request& r, std::string_view) {
  return core.cells.exec(r);
}

http_reply restart_kernel(session_core& core, const http_request&, std::string_view id) {
  return core.cells.restart_kernel(id);
}

}  // namespace dockgate::sidecar::aivory
