// execd's files and directories over the files room's sandbox_files: every path confined
// to /workspace and walked without following a symlink (files/sandbox_files.cpp); errors
// as execd's {code, message} (FILE_NOT_FOUND 404, INVALID_REQUEST_BODY 400, …).
#include <simdjson.h>

#include "files/sandbox_files.hpp"
#include "front/opensandbox/execd/execd_kit.hpp"
#include "front/opensandbox/execd/multipart.hpp"
#include "front/opensandbox/execd/routes_inside.hpp"
#include "util/util.hpp"

namespace dockgate::sidecar::opensandbox::execd {

namespace {

sandbox_files files_of(session_core& core) {
  return sandbox_files(core.config_of, core.containers, core.registry);
}

}  // namespace

void append_file_info(std::string& b, const file_info& f) {
  b += "{\"path\":";
  client::append_json_string(b, valid_utf8(f.path));
  b += ",\"type\":";
  client::append_json_string(b, f.type);
  b += ",\"size\":" + std::to_string(f.size) + ",\"modified_at\":";
  client::append_json_string(b, f.modified_at);
  b += ",\"created_at\":";
  client::append_json_string(b, f.created_at);
  b += ",\"owner\":";
  client::append_json_string(b, f.owner);
  b += ",\"group\":";
  client::append_json_string(b, f.group);
  b += ",\"mode\":" + std::to_string(f.mode) + "}";
}

namespace {

// One upload's metadata part: {path, owner?, group?, mode?}.
std::optional<http_reply> read_metadata(const std::string& json, sandbox_upload& u) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  std::string_view s;
  if (parser.parse(json).get(doc) != simdjson::SUCCESS || !doc.is_object() ||
      doc["path"].get_string().get(s) != simdjson::SUCCESS || s.empty())
    return error(400, "INVALID_FILE_METADATA", "metadata must be a JSON object with a path");
  u.path = std::string(s);
  for (auto [key, field] : {std::pair{"owner", &u.owner}, std::pair{"group", &u.group}}) {
    simdjson::dom::element v;
    if (doc.at_key(key).get(v) != simdjson::SUCCESS || v.is_null()) continue;
    if (v.get_string().get(s) != simdjson::SUCCESS)
      return error(400, "INVALID_FILE_METADATA", std::string(key) + " must be a string");
    *field = std::string(s);
  }
  simdjson::dom::element m;
  if (doc.at_key("mode").get(m) == simdjson::SUCCESS && !m.is_null() &&
      m.get_int64().get(u.mode) != simdjson::SUCCESS)
    return error(400, "INVALID_FILE_METADATA", "mode must be an integer (755)");
  return std::nullopt;
}

// offset/limit: a window of lines (1-based), as text/plain.
http_reply download_lines(call& c, const std::string& path, const std::string& offset,
                          const std::string& limit) {
  char* end1 = nullptr;
  char* end2 = nullptr;
  const auto first = std::strtoll(offset.c_str(), &end1, 10);
  const auto count = std::strtoll(limit.c_str(), &end2, 10);
  if (offset.empty() || limit.empty() || *end1 || *end2 || first < 1 || count < -1)
    return bad_request("offset must be an integer >= 1 and limit >= 0");
  auto got = sandbox_files(c.core.config_of, c.core.containers, c.core.registry)
                 .read_lines(c.sandbox, path, first, count);
  if (!got) return refused(got.error());
  http_reply reply(200, std::move(got.value()));
  reply.content_type = "text/plain; charset=utf-8";
  return reply;
}

std::string base_name(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

std::optional<byte_range> parse_range(std::string_view header) {
  // RFC 9110 §14.2: a Range the server does not understand (another unit, several ranges,
  // a suffix, a first past the last) is ignored and the whole file is sent.
  if (!header.starts_with("bytes=")) return std::nullopt;
  header.remove_prefix(6);
  const auto dash = header.find('-');
  if (dash == 0 || dash == std::string_view::npos || header.find(',') != std::string_view::npos)
    return std::nullopt;
  auto number = [](std::string_view t) -> std::optional<std::int64_t> {
    if (t.empty() || t.size() > 18 || t.find_first_not_of("0123456789") != std::string_view::npos)
      return std::nullopt;
    return std::strtoll(std::string(t).c_str(), nullptr, 10);
  };
  auto first = number(header.substr(0, dash));
  if (!first) return std::nullopt;
  byte_range r{*first, std::nullopt};
  if (dash + 1 < header.size()) {
    r.last = number(header.substr(dash + 1));
    if (!r.last || *r.last < *first) return std::nullopt;
  }
  return r;
}

http_reply upload_files(call& c) {
  auto boundary = multipart_boundary(c.r.field("content-type").value_or(""));
  if (!boundary) return error(400, "INVALID_REQUEST_BODY", "the body must be multipart/form-data");
  multipart_limits limits;
  limits.max_part_bytes = static_cast<std::size_t>(c.core.config_of.max_upload_bytes);
  auto parsed = parse_multipart(c.r.body, *boundary, limits);
  if (!parsed.error.empty())
    return error(parsed.too_large ? 413 : 400, "INVALID_REQUEST_BODY", parsed.error);
  std::vector<const multipart_part*> metadata, files;
  for (const auto& p : parsed.parts) {
    if (p.name == "metadata") metadata.push_back(&p);
    if (p.name == "file") files.push_back(&p);
  }
  if (metadata.empty() || metadata.size() != files.size())
    return error(400, "INVALID_FILE", "the metadata and file parts must come in pairs");
  std::vector<sandbox_upload> uploads(metadata.size());
  for (std::size_t i = 0; i < metadata.size(); ++i) {
    if (auto bad = read_metadata(metadata[i]->body, uploads[i])) return *bad;
    uploads[i].bytes = files[i]->body;
  }
  for (auto& u : uploads)
    if (auto done = files_of(c.core).upload(c.sandbox, std::move(u)); !done)
      return refused(done.error());
  return empty_ok();
}

http_reply download_file(call& c) {
  auto path = query_value(c.r.query, "path");
  if (!path || path->empty()) return missing_query("path");
  const auto offset = query_value(c.r.query, "offset");
  const auto limit = query_value(c.r.query, "limit");
  if (offset || limit) {
    if (c.r.field("range")) return bad_request("offset/limit and Range exclude each other");
    return download_lines(c, *path, offset.value_or("1"), limit.value_or("-1"));
  }
  std::optional<byte_range> range;
  if (auto h = c.r.field("range")) range = parse_range(*h);
  auto got = files_of(c.core).download(c.sandbox, *path, range);
  if (!got && got.error().kind == refusal_kind::conflict) {
    http_reply r = error(416, "INVALID_REQUEST_BODY", "range not satisfiable");
    r.headers.push_back({"Content-Range", "bytes */" + got.error().message});
    return r;
  }
  if (!got) return refused(got.error());
  http_reply reply(range ? 206 : 200, std::move(got->bytes));
  reply.content_type = "application/octet-stream";
  reply.headers.push_back(
      {"Content-Disposition", "attachment; filename=\"" + valid_utf8(base_name(*path)) + "\""});
  if (range)
    reply.headers.push_back({"Content-Range", "bytes " + std::to_string(got->first) + "-" +
                                                  std::to_string(got->last) + "/" +
                                                  std::to_string(got->size)});
  return reply;
}

http_reply file_info_of(call& c) {
  auto paths = query_values(c.r.query, "path");
  if (paths.empty()) return missing_query("path");
  auto found = files_of(c.core).info(c.sandbox, paths);
  if (!found) return refused(found.error());
  std::string b = "{";
  for (std::size_t i = 0; i < paths.size() && i < found->size(); ++i) {
    if (i) b += ',';
    client::append_json_string(b, valid_utf8(paths[i]));
    b += ':';
    append_file_info(b, found.value()[i]);
  }
  return {200, b + "}"};
}

http_reply delete_files(call& c) {
  auto paths = query_values(c.r.query, "path");
  if (paths.empty()) return missing_query("path");
  for (const auto& p : paths)
    if (auto done = files_of(c.core).remove_file(c.sandbox, p); !done) return refused(done.error());
  return empty_ok();
}

http_reply make_directories(call& c) {
  simdjson::dom::parser parser;
  simdjson::dom::object dirs;
  if (parser.parse(c.r.body).get(dirs) != simdjson::SUCCESS)
    return bad_request("body must be an object of {<path>: {mode}}");
  std::vector<std::pair<std::string, std::int64_t>> wanted;
  for (auto [path, spec] : dirs) {
    std::int64_t mode = 0;
    simdjson::dom::element m;
    if (!spec.is_object() || (spec.at_key("mode").get(m) == simdjson::SUCCESS && !m.is_null() &&
                              m.get_int64().get(mode) != simdjson::SUCCESS))
      return bad_request("each directory is {mode?: integer}");
    wanted.emplace_back(std::string(path), mode);
  }
  for (const auto& [path, mode] : wanted)
    if (auto done = files_of(c.core).make_directory(c.sandbox, path, mode); !done)
      return refused(done.error());
  return empty_ok();
}

http_reply delete_directories(call& c) {
  auto paths = query_values(c.r.query, "path");
  if (paths.empty()) return missing_query("path");
  for (const auto& p : paths)
    if (auto done = files_of(c.core).remove_directory(c.sandbox, p); !done)
      return refused(done.error());
  return empty_ok();
}

http_reply list_directory(call& c) {
  auto path = query_value(c.r.query, "path");
  if (!path || path->empty()) return missing_query("path");
  int depth = 1;
  if (auto d = query_value(c.r.query, "depth"); d && !d->empty()) {
    char* end = nullptr;
    const long n = std::strtol(d->c_str(), &end, 10);
    if (*end != '\0' || n < 1) return bad_request("depth must be an integer >= 1");
    depth = static_cast<int>(std::min(n, 64L));
  }
  auto listed = files_of(c.core).list(c.sandbox, *path, depth);
  if (!listed) return refused(listed.error());
  std::string b = "[";
  for (std::size_t i = 0; i < listed->size(); ++i) {
    if (i) b += ',';
    append_file_info(b, listed.value()[i]);
  }
  return {200, b + "]"};
}

}  // namespace dockgate::sidecar::opensandbox::execd
