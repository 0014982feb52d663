// Route table and target canonicality checks. See route.hpp for the invariant.
//
// dockerd (gorilla/mux) strips an optional `/v{version:[0-9.]+}` prefix and matches
// `{name:.*}` parameters that may span `/`. We accept `/` only inside image and plugin
// references, where it is part of the name; anywhere else it is refused, so a target
// never matches two operations in dockerd and one here.
#include "dockgate/policy/route.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <vector>

namespace dockgate::policy {

namespace {

struct operation_info {
  std::string_view name;
  bool hijacks;
  body_kind body;
};

constexpr std::array<operation_info, operation_count> operations{{
#define DOCKGATE_OPERATION(name, hijacks, body) {#name, hijacks, body_kind::body},
#include "dockgate/policy/routes.inc"
#undef DOCKGATE_OPERATION
}};

constexpr route_template route_specs[] = {
#define DOCKGATE_ROUTE(verb, path, name) {http::method::verb, path, operation::name},
#define delete delete_
#include "dockgate/policy/routes.inc"
#undef delete
#undef DOCKGATE_ROUTE
};

constexpr std::size_t max_segments = 32;

// A template split into segments once, at start-up.
struct compiled_route {
  http::method method;
  operation op;
  std::vector<std::string_view> segments;  // literal segments, with "" at the parameter
  int param = -1;                          // index of the parameter segment, -1 if none
  bool multi_segment = false;              // parameter may span `/`
};

std::vector<compiled_route> compile_routes() {
  std::vector<compiled_route> out;
  for (const auto& spec : route_specs) {
    compiled_route r{spec.method, spec.op, {}, -1, false};
    std::string_view t = spec.path_template.substr(1);
    while (true) {
      auto slash = t.find('/');
      std::string_view seg = t.substr(0, slash);
      if (seg.starts_with('{')) {
        r.param = static_cast<int>(r.segments.size());
        r.multi_segment = seg.ends_with("...}");
        r.segments.emplace_back();
      } else {
        r.segments.push_back(seg);
      }
      if (slash == std::string_view::npos) break;
      t = t.substr(slash + 1);
    }
    out.push_back(std::move(r));
  }
  return out;
}

const std::vector<compiled_route>& routes() {
  static const std::vector<compiled_route> table = compile_routes();
  return table;
}

// The routes a target can match, by its first segment: those whose first segment is that
// literal, and those that begin with their parameter (none in the Engine API today, kept
// for every lookup). Which of them match does not depend on the order they are tried in.
struct first_segment_index {
  std::vector<std::pair<std::string_view, std::vector<const compiled_route*>>> by_first;  // sorted
  std::vector<const compiled_route*> param_first;
};

const first_segment_index& index_of_routes() {
  static const first_segment_index index = [] {
    first_segment_index ix;
    for (const auto& r : routes()) {
      if (r.param == 0) {
        ix.param_first.push_back(&r);
        continue;
      }
      const std::string_view first = r.segments.front();
      auto it = std::find_if(ix.by_first.begin(), ix.by_first.end(),
                             [&](const auto& e) { return e.first == first; });
      if (it == ix.by_first.end()) it = ix.by_first.insert(ix.by_first.end(), {first, {}});
      it->second.push_back(&r);
    }
    std::sort(ix.by_first.begin(), ix.by_first.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    return ix;
  }();
  return index;
}

constexpr bool is_alpha(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
constexpr bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
constexpr bool is_hex(char c) {
  return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}
// RFC 3986 pchar without pct-encoded: unreserved / sub-delims / ":" / "@".
constexpr bool is_pchar(char c) {
  if (is_alpha(c) || is_digit(c)) return true;
  switch (c) {
    case '-':
    case '.':
    case '_':
    case '~':
    case '!':
    case '$':
    case '&':
    case '\'':
    case '(':
    case ')':
    case '*':
    case '+':
    case ',':
    case ';':
    case '=':
    case ':':
    case '@':
      return true;
    default:
      return false;
  }
}

std::optional<std::uint16_t> parse_number(std::string_view s) {
  if (s.empty() || (s.size() > 1 && s.front() == '0')) return std::nullopt;  // no leading zeros
  std::uint16_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || end != s.data() + s.size()) return std::nullopt;
  return v;
}

// `v1.41` -> {1, 41}. dockerd's prefix pattern is `v[0-9.]+`; the caller has checked that.
std::optional<api_version> parse_version(std::string_view seg) {
  std::string_view digits = seg.substr(1);
  auto dot = digits.find('.');
  if (dot == std::string_view::npos) return std::nullopt;
  auto major = parse_number(digits.substr(0, dot));
  auto minor = parse_number(digits.substr(dot + 1));
  if (!major || !minor) return std::nullopt;
  return api_version{*major, *minor};
}

bool looks_like_version(std::string_view seg) {
  return seg.size() >= 2 && seg.front() == 'v' &&
         std::all_of(seg.begin() + 1, seg.end(), [](char c) { return is_digit(c) || c == '.'; });
}

std::optional<route_error> check_query(std::string_view q) {
  std::size_t i = 0;
  bool key_start = true;
  bool in_key = true;
  while (i < q.size()) {
    char c = q[i];
    if (c == '&') {
      if (key_start) return route_error::bad_query;  // empty key
      key_start = true;
      in_key = true;
      ++i;
      continue;
    }
    if (c == '=' && in_key) {
      if (key_start) return route_error::bad_query;
      in_key = false;
      ++i;
      continue;
    }
    key_start = false;
    if (c == '%') {
      if (i + 2 >= q.size()) return route_error::bad_query;
      if (!is_hex(q[i + 1]) || !is_hex(q[i + 2])) return route_error::bad_query;
      i += 3;
      continue;
    }
    // Go's url.ParseQuery refuses `;`: the pair would be dropped by dockerd, kept by us.
    if (c == ';') return route_error::bad_query;
    if (!(is_pchar(c) || c == '/' || c == '?')) return route_error::bad_character;
    ++i;
  }
  if (key_start && !q.empty()) return route_error::bad_query;  // trailing `&`
  return std::nullopt;
}

}  // namespace

std::string_view operation_name(operation op) {
  return operations[static_cast<std::size_t>(op)].name;
}

std::optional<operation> operation_from_name(std::string_view name) {
  for (std::size_t i = 0; i < operations.size(); ++i)
    if (operations[i].name == name) return static_cast<operation>(i);
  return std::nullopt;
}

bool operation_hijacks(operation op) {
  return operations[static_cast<std::size_t>(op)].hijacks;
}

body_kind operation_body(operation op) {
  return operations[static_cast<std::size_t>(op)].body;
}

bool operation_mounts_binds(operation op) {
  switch (op) {
    case operation::ContainerStart:
    case operation::ContainerRestart:
    case operation::PutContainerArchive:
    case operation::ContainerArchive:
    case operation::ContainerArchiveInfo:
      return true;
    default:
      return false;
  }
}

std::string_view route_error_text(route_error e) {
  switch (e) {
    case route_error::not_origin_form:
      return "request target must be an absolute path";
    case route_error::bad_character:
      return "request target contains a forbidden character";
    case route_error::percent_encoded:
      return "percent-encoded bytes are not allowed in the path";
    case route_error::empty_segment:
      return "empty path segment (//) is not allowed";
    case route_error::dot_segment:
      return "dot segments are not allowed in the path";
    case route_error::trailing_slash:
      return "trailing slash is not allowed";
    case route_error::bad_version:
      return "malformed API version prefix";
    case route_error::unsupported_version:
      return "API version outside the supported range";
    case route_error::bad_query:
      return "malformed query string";
    case route_error::bad_parameter:
      return "path parameter may not contain '/'";
    case route_error::ambiguous:
      return "request target matches more than one operation";
    case route_error::method_not_allowed:
      return "method not allowed for this path";
    case route_error::not_found:
      return "no such API operation";
  }
  return "bad request target";
}

unsigned route_error_status(route_error e) {
  switch (e) {
    case route_error::not_found:
      return 404;
    case route_error::method_not_allowed:
      return 405;
    default:
      return 400;
  }
}

route_result route_request(http::method method, std::string_view target) {
  if (target.empty() || target.front() != '/') return route_error::not_origin_form;
  std::string_view path = target;
  std::string_view query;
  if (auto q = target.find('?'); q != std::string_view::npos) {
    path = target.substr(0, q);
    query = target.substr(q + 1);
    if (auto err = check_query(query)) return *err;
  }

  // Split into segments, checking every byte of the path.
  std::array<std::string_view, max_segments> segs;
  std::size_t n = 0;
  std::size_t start = 1;
  if (path.size() > 1 && path.back() == '/') return route_error::trailing_slash;
  for (std::size_t i = 1; i <= path.size(); ++i) {
    if (i == path.size() || path[i] == '/') {
      std::string_view seg = path.substr(start, i - start);
      if (seg.empty())
        return path.size() == 1 ? route_error::not_found : route_error::empty_segment;
      if (seg == "." || seg == "..") return route_error::dot_segment;
      if (n == max_segments) return route_error::not_found;
      segs[n++] = seg;
      start = i + 1;
      continue;
    }
    char c = path[i];
    if (c == '%') return route_error::percent_encoded;
    if (!is_pchar(c)) return route_error::bad_character;
  }

  route r;
  std::size_t first = 0;
  if (n > 0 && looks_like_version(segs[0])) {
    auto v = parse_version(segs[0]);
    if (!v) return route_error::bad_version;
    if (*v < min_api_version || *v > max_api_version) return route_error::unsupported_version;
    r.version = v;
    first = 1;
  }
  std::size_t path_offset = first ? 1 + segs[0].size() : 0;
  r.path = path.substr(path_offset);
  r.query = query;
  if (r.path.empty()) return route_error::not_found;

  const std::string_view* s = segs.data() + first;
  const std::size_t count = n - first;
  const compiled_route* found = nullptr;
  std::string_view found_param;
  bool path_known = false;
  bool bad_param = false;
  const auto& index = index_of_routes();
  const std::vector<const compiled_route*>* bucket = nullptr;
  if (auto it = std::lower_bound(index.by_first.begin(), index.by_first.end(), s[0],
                                 [](const auto& e, std::string_view key) { return e.first < key; });
      it != index.by_first.end() && it->first == s[0])
    bucket = &it->second;
  auto candidates = [&](auto&& each) {
    if (bucket)
      for (const compiled_route* cr : *bucket) each(*cr);
    for (const compiled_route* cr : index.param_first) each(*cr);
  };
  bool ambiguous = false;
  candidates([&](const compiled_route& cr) {
    if (ambiguous) return;
    const std::size_t tn = cr.segments.size();
    if (count < tn) return;
    std::string_view param;
    if (cr.param < 0) {
      if (count != tn || !std::equal(s, s + count, cr.segments.begin())) return;
    } else {
      // Literal prefix before the parameter, literal suffix after it; the parameter takes
      // whatever lies between, as dockerd's `{name:.*}` does.
      const auto p = static_cast<std::size_t>(cr.param);
      const std::size_t suffix = tn - p - 1;
      if (!std::equal(s, s + p, cr.segments.begin()) ||
          !std::equal(s + count - suffix, s + count, cr.segments.begin() + p + 1))
        return;
      const std::size_t last = count - suffix - 1;
      if (last != p && !cr.multi_segment) {
        // dockerd would route this with a `/` inside the parameter.
        if (cr.method == method) bad_param = true;
        return;
      }
      const char* begin = s[p].data();
      const char* end = s[last].data() + s[last].size();
      param = std::string_view(begin, static_cast<std::size_t>(end - begin));
    }
    path_known = true;
    if (cr.method != method) return;
    if (found) {
      ambiguous = true;
      return;
    }
    found = &cr;
    found_param = param;
  });
  if (ambiguous) return route_error::ambiguous;
  if (bad_param) return route_error::bad_parameter;
  if (!found) return path_known ? route_error::method_not_allowed : route_error::not_found;
  r.op = found->op;
  r.param = found_param;
  return r;
}

std::span<const route_template> route_templates() {
  return route_specs;
}

std::optional<api_version> parse_api_version(std::string_view text) {
  return parse_version("v" + std::string(text));
}

std::string to_string(api_version v) {
  return std::to_string(v.major) + "." + std::to_string(v.minor);
}

}  // namespace dockgate::policy
