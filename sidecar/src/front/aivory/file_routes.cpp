// The files' routes of the Aivory front.
#include "front/aivory/routes.hpp"

namespace dockgate::sidecar::aivory {

http_reply put_file(session_core& core, const http_request& r, std::string_view) {
  return core.files.put_file(r);
}
http_reply get_file(session_core& core, const http_request& r, std::string_view) {
  return core.files.get_file(r);
}
http_reply list_files(session_core& core, const http_request& r, std::string_view) {
  return core.files.list_files(r);
}
http_reply reset_inputs(session_core& core, const http_request& r, std::string_view) {
  return core.files.reset_inputs(r);
}

}  // namespace dockgate::sidecar::aivory
