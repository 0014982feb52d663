#pragma once
// The execd front's kit: a route's call, execd's error bodies for the core's refusals,
// query values, and the events of execd's streams (research note §2 "Streams": each event
// one bare JSON object followed by a blank line, no "data:" prefix). Internal to the
// sidecar library.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/session_core.hpp"
#include "front/http_server.hpp"
#include "front/opensandbox/replies.hpp"
#include "util/refusal.hpp"

namespace dockgate::sidecar::opensandbox::execd {

// One request to execd's API: the sandbox (its session's id), the path after
// /proxy/44772, what a route's {id} matched.
struct call {
  session_core& core;
  const http_request& r;
  const std::string& sandbox;
  std::string_view id;
};

// A refusal of the core in execd's codes (pkg/web/model/error.go); `not_found_code`: the
// code of a 404 (FILE_NOT_FOUND for a file, CONTEXT_NOT_FOUND for a command).
http_reply refused(const refusal& r, std::string_view not_found_code = "FILE_NOT_FOUND");
inline http_reply bad_request(std::string_view message) {
  return error(400, "INVALID_REQUEST_BODY", message);
}
inline http_reply missing_query(std::string_view name) {
  return error(400, "MISSING_QUERY", "missing query parameter " + std::string(name));
}

// Every value of query key `key` (percent-decoded; an undecodable one is skipped).
std::vector<std::string> query_values(std::string_view query, std::string_view key);
std::optional<std::string> query_value(std::string_view query, std::string_view key);

// A stream of execd's events: through http_request::stream when the server gives one
// (opened at the first event, so a refusal before it is still a JSON error), else collected
// into the reply's body.
class event_stream {
 public:
  explicit event_stream(const http_request& r) : r_(r), request_id_(request_id_of(r)) {}
  void write(const std::string& event);
  // Whether the client still reads.
  bool listening() const { return listening_; }
  http_reply end();

 private:
  const http_request& r_;
  std::string request_id_;
  std::string body_;
  bool opened_ = false;
  bool listening_ = true;
};

std::int64_t unix_ms();
// The events of a stream, each with its "\n\n".
std::string event_text(std::string_view type, std::string_view text, std::int64_t ts);
std::string event_complete(std::int64_t execution_ms, std::int64_t ts);
std::string event_error(std::string_view ename, std::string_view evalue, std::int64_t ts,
                        const std::vector<std::string>& traceback = {});
// A cell's execution count (execd's "execution_count" event, sent before its result).
std::string event_count(std::int64_t count, std::int64_t ts);
// A result: its MIME bundle as "results", text/plain renamed "text" as execd renames it.
std::string event_result(const std::vector<std::pair<std::string, std::string>>& data,
                         std::int64_t ts);

}  // namespace dockgate::sidecar::opensandbox::execd
