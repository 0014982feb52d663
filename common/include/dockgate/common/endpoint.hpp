#pragma once
// The one parser for Docker endpoint addresses (`--upstream`, `--listen`, DOCKER_HOST).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace dockgate::common {

struct endpoint {
  enum class kind { unix_socket, tcp, tls };  // tls: a TCP listener that terminates TLS
  kind scheme = kind::unix_socket;
  std::string path;  // unix: absolute socket path
  std::string host;  // tcp: host name or address (IPv6 without brackets)
  std::uint16_t port = 0;

  bool operator==(const endpoint&) const = default;
  std::string to_string() const;
};

// Parses `unix:///abs/path`, `tcp://host:port` (`tcp://[::1]:port`) or, for listeners,
// `tls://host:port`. Anything else, a relative unix path, a missing or zero port, a path
// or query after a tcp address, is rejected with a reason in `error`.
std::optional<endpoint> parse_endpoint(std::string_view text, std::string* error = nullptr);

}  // namespace dockgate::common
