#include "dockgate/common/endpoint.hpp"

#include <charconv>

namespace dockgate::common {

namespace {
std::optional<endpoint> fail(std::string* error, std::string_view why) {
  if (error) *error = std::string(why);
  return std::nullopt;
}
}  // namespace

std::string endpoint::to_string() const {
  if (scheme == kind::unix_socket) return "unix://" + path;
  const std::string scheme_name = scheme == kind::tls ? "tls://" : "tcp://";
  if (host.find(':') != std::string::npos)
    return scheme_name + "[" + host + "]:" + std::to_string(port);
  return scheme_name + host + ":" + std::to_string(port);
}

std::optional<endpoint> parse_endpoint(std::string_view text, std::string* error) {
  constexpr std::string_view unix_prefix = "unix://";
  constexpr std::string_view tcp_prefix = "tcp://";
  endpoint ep;
  if (text.starts_with(unix_prefix)) {
    std::string_view path = text.substr(unix_prefix.size());
    if (path.empty() || path.front() != '/')
      return fail(error, "unix socket path must be absolute");
    if (path.size() >= 108) return fail(error, "unix socket path is longer than sun_path");
    if (path.find('\0') != std::string_view::npos) return fail(error, "NUL in unix socket path");
    ep.scheme = endpoint::kind::unix_socket;
    ep.path = std::string(path);
    return ep;
  }
  constexpr std::string_view tls_prefix = "tls://";
  const bool tls = text.starts_with(tls_prefix);
  if (!text.starts_with(tcp_prefix) && !tls)
    return fail(error, "endpoint must start with unix://, tcp:// or tls://");
  std::string_view rest = text.substr(tls ? tls_prefix.size() : tcp_prefix.size());
  std::string_view host;
  std::string_view port;
  if (rest.starts_with("[")) {
    auto close = rest.find(']');
    if (close == std::string_view::npos) return fail(error, "unterminated [ in tcp address");
    host = rest.substr(1, close - 1);
    rest = rest.substr(close + 1);
    if (!rest.starts_with(":")) return fail(error, "tcp address needs :port");
    port = rest.substr(1);
  } else {
    auto colon = rest.rfind(':');
    if (colon == std::string_view::npos) return fail(error, "tcp address needs :port");
    host = rest.substr(0, colon);
    port = rest.substr(colon + 1);
    if (host.find(':') != std::string_view::npos)
      return fail(error, "IPv6 address needs [brackets]");
  }
  if (host.empty()) return fail(error, "tcp address needs a host");
  if (host.find_first_of("/?#@ ") != std::string_view::npos) return fail(error, "bad tcp host");
  unsigned value = 0;
  auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (ec != std::errc{} || end != port.data() + port.size() || port.empty() || value == 0 ||
      value > 65535)
    return fail(error, "tcp port must be 1-65535 with nothing after it");
  ep.scheme = tls ? endpoint::kind::tls : endpoint::kind::tcp;
  ep.host = std::string(host);
  ep.port = static_cast<std::uint16_t>(value);
  return ep;
}

}  // namespace dockgate::common
