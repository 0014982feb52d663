// execd's file edits: POST /files/permissions, POST /files/mv, GET /files/search and
// POST /files/replace, over the files room's sandbox_files (confined, never through a
// symlink, as the session user).
#include <simdjson.h>

#include "files/sandbox_files.hpp"
#include "front/opensandbox/execd/execd_kit.hpp"
#include "front/opensandbox/execd/routes_inside.hpp"
#include "util/util.hpp"

namespace dockgate::sidecar::opensandbox::execd {

namespace {

sandbox_files files_of(session_core& core) {
  return sandbox_files(core.config_of, core.containers, core.registry);
}

bool has_nul(std::string_view s) {
  return s.find('\0') != std::string_view::npos;
}

// A member `key` of `o` that must be a string when present: false when it is not.
bool optional_string(simdjson::dom::element o, const char* key, std::string& out) {
  simdjson::dom::element v;
  if (o.at_key(key).get(v) != simdjson::SUCCESS || v.is_null()) return true;
  std::string_view s;
  if (v.get_string().get(s) != simdjson::SUCCESS || has_nul(s)) return false;
  out = std::string(s);
  return true;
}

}  // namespace

http_reply set_permissions(call& c) {
  simdjson::dom::parser parser;
  simdjson::dom::object all;
  if (parser.parse(c.r.body).get(all) != simdjson::SUCCESS)
    return bad_request("body must be an object of {<path>: {mode, owner?, group?}}");
  std::vector<file_permissions> wanted;
  for (auto [path, spec] : all) {
    file_permissions p{std::string(path), 0, {}, {}};
    simdjson::dom::element m;
    if (!spec.is_object() || !optional_string(spec, "owner", p.owner) ||
        !optional_string(spec, "group", p.group) ||
        (spec.at_key("mode").get(m) == simdjson::SUCCESS && !m.is_null() &&
         m.get_int64().get(p.mode) != simdjson::SUCCESS))
      return bad_request("each path is {mode?: integer, owner?: string, group?: string}");
    wanted.push_back(std::move(p));
  }
  for (const auto& p : wanted)
    if (auto done = files_of(c.core).set_permissions(c.sandbox, p); !done)
      return refused(done.error());
  return empty_ok();
}

http_reply move_files(call& c) {
  simdjson::dom::parser parser;
  simdjson::dom::array all;
  if (parser.parse(c.r.body).get(all) != simdjson::SUCCESS)
    return bad_request("body must be an array of {src, dest}");
  std::vector<std::pair<std::string, std::string>> moves;
  for (auto item : all) {
    std::string_view src, dest;
    if (item["src"].get_string().get(src) != simdjson::SUCCESS ||
        item["dest"].get_string().get(dest) != simdjson::SUCCESS)
      return bad_request("each move is {src: string, dest: string}");
    moves.emplace_back(std::string(src), std::string(dest));
  }
  for (const auto& [src, dest] : moves)
    if (auto done = files_of(c.core).move(c.sandbox, src, dest); !done)
      return refused(done.error());
  return empty_ok();
}

http_reply search_files(call& c) {
  auto path = query_value(c.r.query, "path");
  if (!path || path->empty()) return missing_query("path");
  const std::string pattern = query_value(c.r.query, "pattern").value_or("**");
  if (has_nul(pattern)) return bad_request("pattern must not hold NUL");
  auto found = files_of(c.core).search(c.sandbox, *path, pattern);
  if (!found) return refused(found.error());
  std::string b = "[";
  for (std::size_t i = 0; i < found->size(); ++i) {
    if (i) b += ',';
    append_file_info(b, found.value()[i]);
  }
  return {200, b + "]"};
}

http_reply replace_in_files(call& c) {
  simdjson::dom::parser parser;
  simdjson::dom::object all;
  if (parser.parse(c.r.body).get(all) != simdjson::SUCCESS)
    return bad_request("body must be an object of {<path>: {old, new}}");
  struct edit {
    std::string path, old_text, new_text;
  };
  std::vector<edit> edits;
  for (auto [path, spec] : all) {
    edit e{std::string(path), {}, {}};
    if (!spec.is_object() || !optional_string(spec, "old", e.old_text) ||
        !optional_string(spec, "new", e.new_text) || e.old_text.empty())
      return bad_request("each path is {old: non-empty string, new: string}");
    edits.push_back(std::move(e));
  }
  const bool verbose = query_value(c.r.query, "verbose") == "true";
  std::string b = "{";
  for (const auto& e : edits) {
    auto count = files_of(c.core).replace(c.sandbox, e.path, e.old_text, e.new_text);
    if (!count) return refused(count.error());
    if (b.size() > 1) b += ',';
    client::append_json_string(b, valid_utf8(e.path));
    b += ":{\"replacedCount\":" + std::to_string(count.value()) + "}";
  }
  if (!verbose) return empty_ok();
  return {200, b + "}"};
}

}  // namespace dockgate::sidecar::opensandbox::execd
