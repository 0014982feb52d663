// Storage endpoints reduced to origins and compared. See storage_endpoint.hpp for the
// invariant kept.
#include "storage/storage_endpoint.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <charconv>

namespace dockgate::sidecar {

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// A DNS name (or dotted IPv4) as a resolver takes it: labels of [a-z0-9_-], 1-63 bytes
// each, one trailing root dot dropped. Anything else (`%`, `@`, a space) is refused
// rather than guessed at.
std::optional<std::string> host_name(std::string_view h) {
  if (h.ends_with('.')) h.remove_suffix(1);
  if (h.empty() || h.size() > 253) return std::nullopt;
  std::size_t label = 0;
  for (char c : h) {
    if (c == '.') {
      if (label == 0) return std::nullopt;  // an empty label: "a..b", ".a"
      label = 0;
      continue;
    }
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_'))
      return std::nullopt;
    if (++label > 63) return std::nullopt;
  }
  if (label == 0) return std::nullopt;
  return std::string(h);
}

// `host[:port]` (lower case already): the host and the port written (0: none).
struct host_port {
  std::string host;
  std::uint16_t port = 0;
};
std::optional<host_port> split_host_port(std::string_view s, bool allow_wildcard, bool& wildcard) {
  wildcard = false;
  host_port out;
  std::string_view port_text;
  bool has_port = false;
  if (s.starts_with('[')) {
    const auto close = s.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    const std::string literal(s.substr(1, close - 1));
    in6_addr a{};
    if (::inet_pton(AF_INET6, literal.c_str(), &a) != 1) return std::nullopt;  // zone IDs too
    char text[INET6_ADDRSTRLEN] = {};
    if (!::inet_ntop(AF_INET6, &a, text, sizeof text)) return std::nullopt;
    out.host = "[" + std::string(text) + "]";
    s = s.substr(close + 1);
    if (!s.empty()) {
      if (s.front() != ':') return std::nullopt;
      has_port = true;
      port_text = s.substr(1);
    }
  } else {
    const auto colon = s.find(':');
    std::string_view host = s.substr(0, colon);
    if (colon != std::string_view::npos) {
      has_port = true;
      port_text = s.substr(colon + 1);
    }
    if (allow_wildcard && host.starts_with("*.")) {
      wildcard = true;
      host.remove_prefix(2);
    }
    auto name = host_name(host);
    if (!name) return std::nullopt;
    out.host = *name;
  }
  if (has_port) {
    // Digits only (no sign, no second colon), 1-65535.
    if (port_text.empty() || port_text.size() > 5 ||
        port_text.find_first_not_of("0123456789") != std::string_view::npos)
      return std::nullopt;
    unsigned value = 0;
    std::from_chars(port_text.data(), port_text.data() + port_text.size(), value);
    if (value == 0 || value > 65535) return std::nullopt;
    out.port = static_cast<std::uint16_t>(value);
  }
  return out;
}

// `scheme://rest` or `rest` (then `bare_https`): the scheme and the rest, trailing slashes
// dropped. nullopt for another scheme, or none where one is required.
std::optional<std::pair<bool, std::string>> split_scheme(std::string_view text,
                                                         bool scheme_optional) {
  std::string s = lower(text);
  while (s.ends_with('/')) s.pop_back();
  const auto sep = s.find("://");
  if (sep == std::string::npos) {
    if (!scheme_optional) return std::nullopt;
    return std::pair{true, s};
  }
  const std::string scheme = s.substr(0, sep);
  if (scheme != "http" && scheme != "https") return std::nullopt;
  return std::pair{scheme == "https", s.substr(sep + 3)};
}

bool public_provider(const endpoint_origin& o) {
  if (!o.https || o.port != 443) return false;
  auto label_ok = [](std::string_view region) {
    return !region.empty() && region.size() <= 32 &&
           region.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-") ==
               std::string_view::npos;
  };
  const std::string& h = o.host;
  constexpr std::string_view aws = ".amazonaws.com", oss = ".aliyuncs.com";
  if (h.starts_with("s3.") && h.ends_with(aws) && h.size() > 3 + aws.size() &&
      label_ok(std::string_view(h).substr(3, h.size() - 3 - aws.size())))
    return true;
  if (h.starts_with("s3.oss-") && h.ends_with(oss) && h.size() > 7 + oss.size() &&
      label_ok(std::string_view(h).substr(7, h.size() - 7 - oss.size())))
    return true;
  return false;
}

}  // namespace

std::optional<endpoint_origin> parse_endpoint_origin(std::string_view endpoint) {
  auto split = split_scheme(endpoint, false);
  if (!split) return std::nullopt;
  bool wildcard = false;
  auto hp = split_host_port(split->second, false, wildcard);
  if (!hp) return std::nullopt;
  endpoint_origin o;
  o.https = split->first;
  o.host = std::move(hp->host);
  o.port = hp->port ? hp->port : (o.https ? 443 : 80);
  return o;
}

std::optional<allowed_endpoint> parse_allowed_endpoint(std::string_view entry) {
  std::string_view e = entry;
  while (!e.empty() && std::isspace(static_cast<unsigned char>(e.front()))) e.remove_prefix(1);
  while (!e.empty() && std::isspace(static_cast<unsigned char>(e.back()))) e.remove_suffix(1);
  auto split = split_scheme(e, true);
  if (!split) return std::nullopt;
  allowed_endpoint a;
  auto hp = split_host_port(split->second, true, a.wildcard);
  if (!hp) return std::nullopt;
  a.origin.https = split->first;
  a.origin.host = std::move(hp->host);
  a.origin.port = hp->port ? hp->port : (a.origin.https ? 443 : 80);
  return a;
}

bool endpoint_allowed(std::string_view endpoint, const std::vector<std::string>& allowed) {
  const auto o = parse_endpoint_origin(endpoint);
  if (!o) return false;
  if (public_provider(*o)) return true;
  return std::any_of(allowed.begin(), allowed.end(), [&](const std::string& entry) {
    const auto a = parse_allowed_endpoint(entry);
    if (!a || a->origin.https != o->https || a->origin.port != o->port) return false;
    if (!a->wildcard) return a->origin.host == o->host;
    const std::string suffix = "." + a->origin.host;
    return !o->host.starts_with('[') && o->host.size() > suffix.size() && o->host.ends_with(suffix);
  });
}

}  // namespace dockgate::sidecar
