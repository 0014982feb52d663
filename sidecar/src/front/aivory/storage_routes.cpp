// The storage routes of the Aivory front.
#include "front/aivory/routes.hpp"

namespace dockgate::sidecar::aivory {

http_reply storage_put(session_core& core, const http_request& r, std::string_view) {
  return core.storage.put(r);
}
http_reply storage_delete(session_core& core, const http_request& r, std::string_view) {
  return core.storage.remove(r);
}
http_reply storage_gc(session_core& core, const http_request& r, std::string_view) {
  return core.storage.gc(r);
}

}  // namespace dockgate::sidecar::aivory
