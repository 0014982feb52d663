#pragma once
// Files: upload, read, list and reset inputs of a session's workspace, all confined to
// /workspace. Internal to the sidecar library; the invariants are in files.cpp.

#include "dockgate/sidecar/config.hpp"
#include "front/http_server.hpp"

namespace dockgate::sidecar {

class session_containers;
class session_registry;

class files {
 public:
  files(const config& c, const session_containers& containers, session_registry& registry)
      : config_(c), containers_(containers), registry_(registry) {}

  http_reply put_file(const http_request& r);
  http_reply get_file(const http_request& r);
  http_reply list_files(const http_request& r);
  http_reply reset_inputs(const http_request& r);

 private:
  const config& config_;
  const session_containers& containers_;
  session_registry& registry_;
};

}  // namespace dockgate::sidecar
