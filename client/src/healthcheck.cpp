#include "dockgate/client/healthcheck.hpp"

#include <iostream>

#include "dockgate/client/http_client.hpp"

namespace dockgate::client {

int healthcheck(std::string_view url, std::chrono::milliseconds timeout) {
  std::string error;
  auto where = common::parse_endpoint(url, &error);
  if (!where || where->scheme == common::endpoint::kind::tls) {
    std::cerr << "healthcheck: " << url << ": " << (where ? "unix:// or tcp:// only" : error)
              << '\n';
    return 1;
  }
  auto r = http_request(transport{*where, nullptr}, "GET", "/healthz", {}, timeout, 64 * 1024, {},
                        "localhost");
  if (r.status == 200) return 0;
  std::cerr << "healthcheck: " << url << ": "
            << (r.status ? "status " + std::to_string(r.status) + " " + r.body : r.error) << '\n';
  return 1;
}

}  // namespace dockgate::client
