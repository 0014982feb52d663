#pragma once
// A front's routes: method + path pattern → handler, looked up once per request. A pattern
// is literal segments and at most one `{id}`, which matches one path segment (any text
// without '/', possibly empty: the handler checks it); the handler gets what it matched.
// A path no pattern matches is a miss of `path`; one that matches only under another
// method is a miss of `method` (the front answers 404 / 405). Internal to the sidecar.

#include <optional>
#include <string_view>
#include <utility>
#include <vector>

namespace dockgate::sidecar {

template <class Handler>
class route_table {
 public:
  struct route {
    std::string_view method;
    std::string_view pattern;
    Handler handler;
  };
  struct found {
    const Handler* handler = nullptr;  // null: a miss (see `method_missed`)
    std::string_view id;               // what `{id}` matched
    bool method_missed = false;        // the path matched a route of another method
  };

  explicit route_table(std::vector<route> routes) : routes_(std::move(routes)) {}

  found find(std::string_view method, std::string_view path) const {
    found miss;
    for (const auto& r : routes_) {
      std::string_view id;
      if (!matches(r.pattern, path, id)) continue;
      if (r.method == method) return {&r.handler, id, false};
      miss.method_missed = true;
    }
    return miss;
  }

  // The first route whose pattern matches `path`, whatever its method: what a front knows
  // of a request before its body is read (its body limit); nullptr when none.
  const Handler* find_path(std::string_view path) const {
    for (const auto& r : routes_) {
      std::string_view id;
      if (matches(r.pattern, path, id)) return &r.handler;
    }
    return nullptr;
  }

 private:
  static bool matches(std::string_view pattern, std::string_view path, std::string_view& id) {
    const auto hole = pattern.find("{id}");
    if (hole == std::string_view::npos) return pattern == path;
    const auto head = pattern.substr(0, hole);
    const auto tail = pattern.substr(hole + 4);
    if (path.size() < head.size() + tail.size() || !path.starts_with(head) || !path.ends_with(tail))
      return false;
    id = path.substr(head.size(), path.size() - head.size() - tail.size());
    return !id.empty() && id.find('/') == std::string_view::npos;
  }

  std::vector<route> routes_;
};

}  // namespace dockgate::sidecar
