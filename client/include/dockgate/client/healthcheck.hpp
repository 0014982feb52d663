#pragma once
// `dockgate-proxy healthcheck URL` and `dockgate-sidecar healthcheck [URL]`: the probe a
// container image's HEALTHCHECK (or systemd, or an operator) runs, with nothing else in
// the image. GET /healthz on a unix:// or tcp:// listener.

#include <chrono>
#include <string_view>

namespace dockgate::client {

// 0 when the listener answers /healthz with 200 within `timeout`; otherwise 1, with the
// reason on stderr.
int healthcheck(std::string_view url, std::chrono::milliseconds timeout = std::chrono::seconds(5));

}  // namespace dockgate::client
