// Cells: POST /exec, the run, the clean-up and the artifacts (seed §1.5).
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

http_reply service::exec(const http_request& r) {
  body_fields f(r.body);
  if (f.error) return *f.error;
  std::optional<http_reply> err;
  auto sid = f.string("session_id", true, err);
  auto code = f.string("code", true, err);
  auto timeout_ms = f.integer("timeout_ms", err);
  if (err) return *err;
  if (utf8_chars(*code) > static_cast<std::size_t>(config_.max_code_bytes))
    return invalid("code", "ensure this value has at most " + std::to_string(config_.max_code_bytes) + " characters",
                   "value_error.any_str.max_length");
  if (code->size() > static_cast<std::size_t>(config_.max_code_bytes)) return detail(413, "code too large");
  if (!valid_session_id(*sid)) return detail(400, "invalid session_id");
  const std::int64_t ms = std::clamp<std::int64_t>(timeout_ms && *timeout_ms ? *timeout_ms : config_.default_exec_timeout_ms,
                                                   1000, config_.exec_timeout_cap_ms);
  auto s = find(*sid);
  if (!s || s->terminating) return detail(404, "session not found or not running");
  std::unique_lock lock(s->lock, std::defer_lock);
  if (!lock.try_lock_for(std::chrono::seconds(config_.queue_timeout_seconds))) return detail(429, "session is busy");
  if (config_.max_concurrent_execs > 0 && !exec_slots_.try_acquire_for(std::chrono::seconds(config_.queue_timeout_seconds)))
    return detail(429, "exec queue is full");
  struct release {
    std::counting_semaphore<1 << 20>* s;
    ~release() {
      if (s) s->release();
    }
  } slot{config_.max_concurrent_execs > 0 ? &exec_slots_ : nullptr};
  if (s->terminating) return detail(404, "session not found or not running");

  // Two execs around the cell (each exec is three Engine API calls): the first snapshots
  // /workspace/outputs, writes the cell from stdin and becomes `timeout ... python3`; the
  // second kills whatever the cell left behind, removes it and snapshots outputs again.
  const std::string token = random_hex(16);
  const std::string cell = "/tmp/dockgate-cell-" + token + ".py";
  const std::string before_file = "/tmp/dockgate-before-" + token;
  const std::string find_outputs = "find /workspace/outputs -type f -printf '%p\\t%T@\\t%s\\n' 2>/dev/null";
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%.3fs", static_cast<double>(ms) / 1000.0);
  client::exec_options run;
  run.cmd = {"sh", "-c",
             find_outputs + " > " + shell_quote(before_file) + "; cat > " + shell_quote(cell) +
                 " || exit 125; exec timeout --kill-after=2s " + seconds + " python3 " + shell_quote(cell)};
  run.env = {"DOCKGATE_CELL_TOKEN=" + token};
  run.stdin_data = *code;
  run.attach_stdin = true;
  run.max_stdout = run.max_stderr = static_cast<std::size_t>(config_.max_output_bytes);
  run.timeout = std::chrono::milliseconds(ms) + 15s;  // the host-side wall clock
  auto result = docker_.exec(s->container, run);
  // Every process the cell started carries the token in its environment (detached and
  // double-forked ones too): all are killed. Nothing keeps running after the answer.
  auto cleanup = run_in(s->container,
                        {"sh", "-c",
                         "for d in /proc/[0-9]*; do if tr '\\000' '\\n' < \"$d/environ\" 2>/dev/null | grep -qxF " +
                             shell_quote("DOCKGATE_CELL_TOKEN=" + token) + "; then kill -9 \"${d#/proc/}\" 2>/dev/null; fi; done; rm -f " +
                             shell_quote(cell) + "; cat " + shell_quote(before_file) + " 2>/dev/null; echo ---; " + find_outputs +
                             "; rm -f " + shell_quote(before_file)},
                        15s);
  if (!result.started && result.error.find("409") != std::string::npos) return detail(404, "session not found or not running");
  if (!result.started && result.error.find("404") != std::string::npos) return detail(404, "session not found or not running");
  if (result.started && result.exit_code == 125 && !result.timed_out)
    return detail(500, "write cell failed: " + result.stderr_data);
  auto parse_snapshot = [](std::string_view text) {
    std::map<std::string, std::string> files;
    while (!text.empty()) {
      auto nl = text.find('\n');
      std::string_view line = text.substr(0, nl);
      text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
      auto t1 = line.find('\t');
      if (t1 == std::string_view::npos) continue;
      files[std::string(line.substr(0, t1))] = std::string(line.substr(t1 + 1));
    }
    return files;
  };
  const std::string_view listing = cleanup.stdout_data;
  const auto separator = listing.find("---\n");
  const auto before = parse_snapshot(listing.substr(0, separator));
  const auto after_files = separator == std::string_view::npos ? std::map<std::string, std::string>{}
                                                               : parse_snapshot(listing.substr(separator + 4));
  if (!result.started) return detail(500, "exec failed: " + result.error);
  std::int64_t exit_code = result.timed_out ? 124 : result.exit_code;
  const std::string kb = std::to_string(config_.max_output_bytes / 1024) + "KB";
  std::string out = valid_utf8(result.stdout_data);
  std::string errs = valid_utf8(result.stderr_data);
  if (result.stdout_dropped) out += "\n... [truncated, stdout exceeded " + kb + "]";
  if (result.stderr_dropped) errs += "\n... [truncated, stderr exceeded " + kb + "]";
  if (exit_code == 124) errs += std::string("\n[sandbox] execution exceeded ") + seconds + " and was killed";
  s->last_used = std::chrono::steady_clock::now();

  // Artifacts: new or changed regular files under /workspace/outputs, by path.
  const auto& after = after_files;
  std::vector<std::string> changed;
  for (const auto& [path, stamp] : after) {
    auto it = before.find(path);
    if (it == before.end() || it->second != stamp) changed.push_back(path);
  }
  std::string files = "[";
  std::int64_t total = 0, count = 0, skipped = 0;
  const auto collect_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(config_.max_collect_seconds);
  for (const auto& path : changed) {
    const std::string& stamp = after.at(path);
    const std::int64_t size = std::strtoll(stamp.substr(stamp.find('\t') + 1).c_str(), nullptr, 10);
    if (std::chrono::steady_clock::now() > collect_deadline || size > config_.max_artifact_bytes ||
        count >= config_.max_files_per_exec || total + size > config_.max_total_artifact_bytes) {
      ++skipped;
      continue;
    }
    auto data = run_in(s->container, {"cat", "--", path}, std::chrono::seconds(config_.collect_file_timeout_s), {}, false,
                       {}, static_cast<std::size_t>(config_.max_artifact_bytes));
    if (!data.started || data.exit_code != 0 || data.stdout_dropped) {
      ++skipped;
      continue;
    }
    const std::string name = path.substr(path.rfind('/') + 1);
    if (count++) files += ',';
    files += "{\"name\":";
    client::append_json_string(files, valid_utf8(name));
    files += ",\"mime_type\":";
    client::append_json_string(files, mime_type_for(name));
    files += ",\"data_base64\":\"" + base64_encode(data.stdout_data) + "\"}";
    total += static_cast<std::int64_t>(data.stdout_data.size());
  }
  files += ']';
  if (skipped) {
    errs += "\n[sandbox] skipped " + std::to_string(skipped) + " output file(s) because artifact limits are " +
            std::to_string(config_.max_files_per_exec) + " files, " + std::to_string(config_.max_artifact_bytes) +
            " bytes per file, " + std::to_string(config_.max_total_artifact_bytes) + " bytes total";
  }
  while (!errs.empty() && (errs.front() == '\n' || errs.front() == ' ')) errs.erase(0, 1);
  std::string body = "{\"stdout\":";
  client::append_json_string(body, out);
  body += ",\"stderr\":";
  client::append_json_string(body, errs);
  body += ",\"exit_code\":" + std::to_string(exit_code) + ",\"files\":" + files + "}";
  return {200, body};
}

}  // namespace dockgate::sidecar
