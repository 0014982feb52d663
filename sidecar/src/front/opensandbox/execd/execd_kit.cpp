#include "front/opensandbox/execd/execd_kit.hpp"

#include "dockgate/client/engine.hpp"
#include "front/request.hpp"
#include "util/util.hpp"

namespace dockgate::sidecar::opensandbox::execd {

http_reply refused(const refusal& r, std::string_view not_found_code) {
  switch (r.kind) {
    case refusal_kind::invalid:
      return error(400, "INVALID_REQUEST_BODY", r.message);
    case refusal_kind::not_found:
      return error(404, not_found_code, r.message);
    case refusal_kind::too_large:
      return error(413, "INVALID_FILE", r.message);
    case refusal_kind::busy:
      return error(429, "RUNTIME_ERROR", r.message);
    case refusal_kind::conflict:
      return error(409, "RUNTIME_ERROR", r.message);
    case refusal_kind::unavailable:
      return error(503, "RUNTIME_ERROR", r.message);
    case refusal_kind::engine_failed:
      return error(502, "RUNTIME_ERROR", r.message);
    case refusal_kind::failed:
      break;
  }
  return error(500, "RUNTIME_ERROR", r.message);
}

std::vector<std::string> query_values(std::string_view query, std::string_view key) {
  // A malformed escape anywhere is no value at all: the route then says what is missing.
  return sidecar::query_values(query, key).value_or(std::vector<std::string>());
}

std::optional<std::string> query_value(std::string_view query, std::string_view key) {
  auto all = query_values(query, key);
  if (all.empty()) return std::nullopt;
  return all.front();
}

std::int64_t unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string event_text(std::string_view type, std::string_view text, std::int64_t ts) {
  std::string e = "{\"type\":";
  client::append_json_string(e, type);
  e += ",\"text\":";
  client::append_json_string(e, valid_utf8(text));
  return e + ",\"timestamp\":" + std::to_string(ts) + "}\n\n";
}

std::string event_complete(std::int64_t execution_ms, std::int64_t ts) {
  return "{\"type\":\"execution_complete\",\"execution_time\":" + std::to_string(execution_ms) +
         ",\"timestamp\":" + std::to_string(ts) + "}\n\n";
}

std::string event_error(std::string_view ename, std::string_view evalue, std::int64_t ts,
                        const std::vector<std::string>& traceback) {
  std::string e = "{\"type\":\"error\",\"error\":{\"ename\":";
  client::append_json_string(e, valid_utf8(ename));
  e += ",\"evalue\":";
  client::append_json_string(e, valid_utf8(evalue));
  e += ",\"traceback\":[";
  for (std::size_t i = 0; i < traceback.size(); ++i) {
    if (i) e += ',';
    client::append_json_string(e, valid_utf8(traceback[i]));
  }
  return e + "]},\"timestamp\":" + std::to_string(ts) + "}\n\n";
}

std::string event_count(std::int64_t count, std::int64_t ts) {
  return "{\"type\":\"execution_count\",\"execution_count\":" + std::to_string(count) +
         ",\"timestamp\":" + std::to_string(ts) + "}\n\n";
}

std::string event_result(const std::vector<std::pair<std::string, std::string>>& data,
                         std::int64_t ts) {
  std::string e = "{\"type\":\"result\",\"results\":{";
  bool first = true;
  for (const auto& [mime, value] : data) {
    if (!first) e += ',';
    first = false;
    client::append_json_string(
        e, mime == "text/plain" ? std::string_view("text") : std::string_view(valid_utf8(mime)));
    e += ':';
    client::append_json_string(e, valid_utf8(value));
  }
  return e + "},\"timestamp\":" + std::to_string(ts) + "}\n\n";
}

void event_stream::write(const std::string& event) {
  if (!r_.stream) {
    body_ += event;
    return;
  }
  if (!opened_) {
    opened_ = true;
    listening_ = r_.stream->open(200, "text/event-stream", {{"X-Request-ID", request_id_}});
  }
  listening_ = listening_ && r_.stream->write(event);
}

http_reply event_stream::end() {
  http_reply reply(200, std::move(body_), r_.stream != nullptr);
  reply.content_type = "text/event-stream";
  reply.headers.push_back({"X-Request-ID", request_id_});
  return reply;
}

}  // namespace dockgate::sidecar::opensandbox::execd
