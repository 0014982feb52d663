// Files: upload, read, list, reset inputs, all confined to /workspace (seed §1.6).
#include "dockgate/sidecar/service.hpp"

#include <simdjson.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "dockgate/sidecar/archive.hpp"
#include "request.hpp"

namespace dockgate::sidecar {

using namespace std::chrono_literals;

http_reply service::put_file(const http_request& r) {
  body_fields f(r.body);
  if (f.error) return *f.error;
  std::optional<http_reply> err;
  auto sid = f.string("session_id", true, err);
  auto path = f.string("path", true, err);
  auto data = f.string("data_base64", true, err);
  if (err) return *err;
  const std::size_t max = static_cast<std::size_t>(config_.max_upload_bytes);
  if (data->size() > (max + 2) / 3 * 4) return detail(413, "file too large");
  auto bytes = base64_decode_strict(*data);
  if (!bytes) return detail(400, "invalid base64");
  if (bytes->size() > max) return detail(413, "file too large");
  auto target = workspace_path(*path);
  if (!target) return detail(400, "path must be under /workspace");
  held_session held;
  if (auto refused = acquire(*sid, held)) return *refused;
  const auto& s = held.s;
  const std::string parent = target->substr(0, target->rfind('/'));
  auto mk = run_in(s->container, {"mkdir", "-p", "--", parent.empty() ? "/" : parent}, 20s);
  if (!mk.started || mk.exit_code != 0) return detail(500, "mkdir failed: " + mk.stderr_data);
  // Resolved inside the container: a symlink in the workspace cannot lead out.
  auto real = run_in(s->container, {"realpath", "-m", "--", *target}, 20s);
  std::string resolved = real.stdout_data;
  while (!resolved.empty() && resolved.back() == '\n') resolved.pop_back();
  if (!real.started || real.exit_code != 0 || !workspace_path(resolved) || *workspace_path(resolved) != resolved)
    return detail(400, "path resolves outside /workspace");
  auto written = run_in(s->container, {"sh", "-c", "cat > " + shell_quote(resolved)}, 60s, std::move(*bytes), true);
  if (!written.started || written.exit_code != 0) return detail(500, "write failed: " + written.stderr_data);
  s->last_used = std::chrono::steady_clock::now();
  return {200, R"({"ok":true})"};
}

http_reply service::get_file(const http_request& r) {
  body_fields f(r.body);
  if (f.error) return *f.error;
  std::optional<http_reply> err;
  auto sid = f.string("session_id", true, err);
  auto path = f.string("path", true, err);
  if (err) return *err;
  auto target = workspace_path(*path);
  if (!target) return detail(400, "path must be under /workspace");
  held_session held;
  if (auto refused = acquire(*sid, held)) return *refused;
  const auto& s = held.s;
  auto real = run_in(s->container, {"realpath", "-m", "--", *target}, 20s);
  std::string resolved = real.stdout_data;
  while (!resolved.empty() && resolved.back() == '\n') resolved.pop_back();
  if (!real.started || real.exit_code != 0 || !workspace_path(resolved) || *workspace_path(resolved) != resolved)
    return detail(400, "path resolves outside /workspace");
  auto is_file = run_in(s->container, {"test", "-f", resolved}, 20s);
  if (!is_file.started || is_file.exit_code != 0) return detail(404, "file not found");
  // Bounded: the answer is base64 in JSON, in memory.
  const std::size_t cap = static_cast<std::size_t>(config_.max_body_bytes);
  auto data = run_in(s->container, {"cat", "--", resolved}, 120s, {}, false, {}, cap);
  if (!data.started || data.exit_code != 0) return detail(500, "read failed: " + data.stderr_data);
  if (data.stdout_dropped) return detail(413, "file too large");
  s->last_used = std::chrono::steady_clock::now();
  return {200, "{\"data_base64\":\"" + base64_encode(data.stdout_data) + "\"}"};
}

http_reply service::list_files(const http_request& r) {
  held_session held;
  if (auto refused = session_request(r, held)) return *refused;
  const auto& s = held.s;
  auto found = run_in(s->container,
                      {"sh", "-c", "find /workspace -maxdepth 6 -type f -printf '%s\\t%P\\0' 2>/dev/null | head -c 1000000"},
                      30s);
  std::vector<std::pair<std::string, std::string>> entries;  // path, size
  std::string_view out = found.stdout_data;
  while (!out.empty()) {
    auto nul = out.find('\0');
    if (nul == std::string_view::npos) break;  // a record cut by head -c
    std::string_view rec = out.substr(0, nul);
    out.remove_prefix(nul + 1);
    auto tab = rec.find('\t');
    if (tab == std::string_view::npos) continue;
    entries.emplace_back(std::string(rec.substr(tab + 1)), std::string(rec.substr(0, tab)));
  }
  std::sort(entries.begin(), entries.end());
  std::string body = "{\"files\":[";
  for (std::size_t i = 0; i < entries.size() && i < 500; ++i) {
    if (i) body += ',';
    body += "{\"path\":";
    client::append_json_string(body, valid_utf8(entries[i].first));
    body += ",\"size\":" + std::to_string(std::strtoll(entries[i].second.c_str(), nullptr, 10)) + "}";
  }
  s->last_used = std::chrono::steady_clock::now();
  return {200, body + "]}"};
}

http_reply service::reset_inputs(const http_request& r) {
  held_session held;
  if (auto refused = session_request(r, held)) return *refused;
  const auto& s = held.s;
  auto reset = run_in(s->container,
                      {"sh", "-c", std::string(reset_inputs_script)},
                      30s);
  if (!reset.started || reset.exit_code != 0) return detail(500, "reset inputs failed: " + reset.stderr_data);
  s->last_used = std::chrono::steady_clock::now();
  return {200, R"({"ok":true})"};
}

}  // namespace dockgate::sidecar
