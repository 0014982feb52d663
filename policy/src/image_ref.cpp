#include "dockgate/policy/image_ref.hpp"

#include <algorithm>

namespace dockgate::policy {

namespace {

bool fail(std::string* error, std::string_view why) {
  if (error) *error = std::string(why);
  return false;
}

constexpr bool lower_alnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

// path-component: [a-z0-9]+ ((\.|_|__|-+)[a-z0-9]+)*
bool valid_component(std::string_view c) {
  if (c.empty() || !lower_alnum(c.front()) || !lower_alnum(c.back())) return false;
  for (std::size_t i = 0; i < c.size();) {
    if (lower_alnum(c[i])) {
      ++i;
      continue;
    }
    std::size_t j = i;
    while (j < c.size() && !lower_alnum(c[j])) ++j;
    std::string_view sep = c.substr(i, j - i);
    const bool ok = sep == "." || sep == "_" || sep == "__" ||
                    std::all_of(sep.begin(), sep.end(), [](char x) { return x == '-'; });
    if (!ok) return false;
    i = j;
  }
  return true;
}

bool valid_domain(std::string_view d) {
  if (d.empty()) return false;
  std::string_view host = d;
  if (auto colon = d.rfind(':'); colon != std::string_view::npos && d.front() != '[') {
    std::string_view port = d.substr(colon + 1);
    if (port.empty() ||
        !std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; }))
      return false;
    host = d.substr(0, colon);
  }
  if (host.empty()) return false;
  return std::all_of(host.begin(), host.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '-';
  });
}

bool valid_tag(std::string_view t) {
  if (t.empty() || t.size() > 128) return false;
  auto word = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  };
  if (!word(t.front())) return false;
  return std::all_of(t.begin(), t.end(), [&](char c) { return word(c) || c == '.' || c == '-'; });
}

bool valid_digest(std::string_view d) {
  auto colon = d.find(':');
  if (colon == std::string_view::npos) return false;
  std::string_view algo = d.substr(0, colon);
  std::string_view hex = d.substr(colon + 1);
  const bool hex_ok = std::all_of(hex.begin(), hex.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
  });
  if (algo == "sha256") return hex.size() == 64 && hex_ok;
  if (algo == "sha512") return hex.size() == 128 && hex_ok;
  return false;
}

}  // namespace

std::string image_reference::normalized() const {
  std::string out = domain + "/" + path;
  if (!tag.empty()) out += ":" + tag;
  if (!digest.empty()) out += "@" + digest;
  return out;
}

std::optional<image_reference> parse_image_reference(std::string_view text, bool default_tag,
                                                     std::string* error) {
  image_reference ref;
  if (text.empty() || text.size() > 512)
    return fail(error, "empty or overlong image reference"), std::nullopt;
  std::string_view name = text;
  if (auto at = text.find('@'); at != std::string_view::npos) {
    ref.digest = std::string(text.substr(at + 1));
    name = text.substr(0, at);
    if (!valid_digest(ref.digest)) return fail(error, "invalid digest"), std::nullopt;
  }
  const auto last_slash = name.rfind('/');
  if (auto colon = name.rfind(':'); colon != std::string_view::npos &&
                                    (last_slash == std::string_view::npos || colon > last_slash)) {
    ref.tag = std::string(name.substr(colon + 1));
    name = name.substr(0, colon);
    if (!valid_tag(ref.tag)) return fail(error, "invalid tag"), std::nullopt;
  }
  std::string_view rest = name;
  if (auto slash = name.find('/'); slash != std::string_view::npos) {
    std::string_view first = name.substr(0, slash);
    if (first.find('.') != std::string_view::npos || first.find(':') != std::string_view::npos ||
        first == "localhost") {
      if (!valid_domain(first)) return fail(error, "invalid registry host"), std::nullopt;
      ref.domain = std::string(first);
      rest = name.substr(slash + 1);
    }
  }
  if (ref.domain.empty() || ref.domain == "index.docker.io") ref.domain = "docker.io";
  // Every path component lower case and well formed.
  std::string_view r = rest;
  while (true) {
    auto slash = r.find('/');
    if (!valid_component(r.substr(0, slash)))
      return fail(error, "invalid repository name (must be lower case)"), std::nullopt;
    if (slash == std::string_view::npos) break;
    r.remove_prefix(slash + 1);
  }
  ref.path = std::string(rest);
  if (ref.domain == "docker.io" && ref.path.find('/') == std::string::npos)
    ref.path = "library/" + ref.path;
  if (ref.domain.size() + 1 + ref.path.size() > 255)
    return fail(error, "repository name too long"), std::nullopt;
  if (ref.tag.empty() && ref.digest.empty() && default_tag) ref.tag = "latest";
  return ref;
}

bool glob_match(std::string_view pattern, std::string_view text) {
  // Iterative wildcard match with backtracking on the last `*`.
  std::size_t p = 0, t = 0, star = std::string_view::npos, mark = 0;
  while (t < text.size()) {
    if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      mark = t;
    } else if (p < pattern.size() && pattern[p] == text[t]) {
      ++p;
      ++t;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      t = ++mark;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

}  // namespace dockgate::policy
