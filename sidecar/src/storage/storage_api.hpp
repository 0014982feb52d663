#pragma once
// POST /storage/put, /storage/delete, /storage/gc: the seed's storage API. Internal to the
// sidecar library.

#include "dockgate/sidecar/config.hpp"
#include "front/http_server.hpp"

namespace dockgate::sidecar {

class storage_api {
 public:
  explicit storage_api(const config& c) : config_(c) {}

  http_reply put(const http_request& r);
  http_reply remove(const http_request& r);
  http_reply gc(const http_request& r);

 private:
  const config& config_;
};

}  // namespace dockgate::sidecar
