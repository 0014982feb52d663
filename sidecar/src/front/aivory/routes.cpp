// The Aivory sidecar's routes (docs/design.md, "The sidecar's rooms"). GET /healthz and
// the authentication of every other route are the service's (front/service.cpp), before
// this table is consulted.
#include "front/aivory/routes.hpp"

namespace dockgate::sidecar::aivory {

const route_table<handler>& routes() {
  static const route_table<handler> table({
      {"POST", "/sessions", create_session},
      {"DELETE", "/sessions/{id}", delete_session},
      {"POST", "/sessions/{id}/restart", restart_kernel},
      {"POST", "/exec", exec},
      {"POST", "/files", put_file},
      {"POST", "/files/get", get_file},
      {"POST", "/files/list", list_files},
      {"POST", "/files/reset-inputs", reset_inputs},
      {"POST", "/storage/put", storage_put},
      {"POST", "/storage/delete", storage_delete},
      {"POST", "/storage/gc", storage_gc},
  });
  return table;
}

}  // namespace dockgate::sidecar::aivory
