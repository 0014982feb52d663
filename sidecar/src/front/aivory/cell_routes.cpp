// The cells' routes of the Aivory front: POST /exec's body parsed into a cell request
// (FastAPI's 422 shapes; the code's size a parse-time limit), the cell's result written as
// the Aivory answer, plain or as server-sent events; POST /sessions/{id}/restart.
#include <algorithm>
#include <cctype>

#include "front/aivory/cell_answers.hpp"
#include "front/aivory/replies.hpp"
#include "front/aivory/routes.hpp"
#include "front/request.hpp"
#include "util/ids.hpp"
#include "util/util.hpp"

namespace dockgate::sidecar::aivory {

namespace {

// The request, or the answer that refuses it: 422 for a missing or mistyped field or code
// over SANDBOX_MAX_CODE_BYTES characters, 413 for code over as many bytes, 400 for a
// malformed session id.
std::optional<http_reply> parse_cell(const http_request& r, std::int64_t max_code,
                                     cell_request& out) {
  body_fields f(r.body);
  if (f.error) return *f.error;
  std::optional<http_reply> err;
  auto sid = f.string("session_id", true, err);
  auto code = f.string("code", true, err);
  out.timeout_ms = f.integer("timeout_ms", err);
  if (err) return *err;
  const auto max = static_cast<std::size_t>(max_code);
  if (utf8_chars(*code) > max)
    return invalid("code",
                   "ensure this value has at most " + std::to_string(max_code) + " characters",
                   "value_error.any_str.max_length");
  if (code->size() > max) return detail(413, "code too large");
  if (!valid_session_id(*sid)) return detail(400, "invalid session_id");
  out.session_id = std::move(*sid);
  out.code = std::move(*code);
  return std::nullopt;
}

http_reply answer(const outcome<cell_result>& r) {
  return r ? http_reply{200, cell_body(r.value())} : reply(r.error());
}

}  // namespace

http_reply exec(session_core& core, const http_request& r, std::string_view) {
  // With `Accept: text/event-stream` the answer is a stream of events: the cell's output
  // as it comes, then the same result object as a plain answer. An error before any
  // output is still a plain error answer (its status and body).
  cell_events events(r.stream && wants_event_stream(r.accept) ? r.stream : nullptr);
  cell_request request;
  http_reply reply;
  if (auto refused = parse_cell(r, core.config_of.max_code_bytes, request))
    reply = std::move(*refused);
  else if (auto asleep = core.registry.wake(request.session_id))  // a dormant one comes back
    reply = ::dockgate::sidecar::aivory::reply(*asleep);
  else
    reply = answer(core.cells.run(request, events.active() ? &events : nullptr));
  if (!events.active() || (reply.status != 200 && !events.opened())) return reply;
  events.flush();
  events.send(reply.status == 200 ? "result" : "error", reply.body, true);
  return {200, {}, true};
}

http_reply restart_kernel(session_core& core, const http_request&, std::string_view id) {
  held_session held;
  if (auto refused = core.registry.acquire(std::string(id), held)) return reply(*refused);
  auto restarted = core.cells.restart_kernel(*held.s);
  if (!restarted) return reply(restarted.error());
  const auto& k = restarted->kernel;
  return {200, "{\"ok\":true,\"kernel\":" + kernel_json(k.name, k.status) + "}"};
}

std::string cell_body(const cell_result& r) {
  std::string body = "{\"stdout\":";
  client::append_json_string(body, r.stdout_text);
  body += ",\"stderr\":";
  client::append_json_string(body, r.stderr_text);
  body += ",\"exit_code\":" + std::to_string(r.exit_code) + ",\"files\":[";
  for (std::size_t i = 0; i < r.files.size(); ++i) {
    const auto& f = r.files[i];
    if (i) body += ',';
    body += "{\"name\":";
    client::append_json_string(body, f.name);
    body += ",\"mime_type\":";
    client::append_json_string(body, f.mime_type);
    body += ",\"data_base64\":\"" + base64_encode(f.data) + "\"}";
  }
  body += ']';
  if (r.kernel) body += ",\"kernel\":" + kernel_json(r.kernel->name, r.kernel->status);
  return body + "}";
}

std::string kernel_json(std::string_view name, const kernel_status& st) {
  std::string out = "{\"name\":";
  client::append_json_string(out, name);
  out += ",\"restarted\":";
  out += st.restarted ? "true" : "false";
  out += ",\"execution_count\":" + std::to_string(st.execution_count) + "}";
  return out;
}

bool wants_event_stream(std::string_view accept) {
  while (!accept.empty()) {
    const auto comma = accept.find(',');
    std::string_view range = accept.substr(0, comma);
    accept = comma == std::string_view::npos ? std::string_view{} : accept.substr(comma + 1);
    range = range.substr(0, range.find(';'));
    while (!range.empty() && (range.front() == ' ' || range.front() == '\t'))
      range.remove_prefix(1);
    while (!range.empty() && (range.back() == ' ' || range.back() == '\t')) range.remove_suffix(1);
    constexpr std::string_view wanted = "text/event-stream";
    if (range.size() == wanted.size() &&
        std::equal(range.begin(), range.end(), wanted.begin(),
                   [](char a, char b) { return std::tolower(static_cast<unsigned char>(a)) == b; }))
      return true;
  }
  return false;
}

std::size_t utf8_whole_prefix(std::string_view s) {
  // Look back over at most three continuation bytes for the sequence's lead byte.
  for (std::size_t back = 1; back <= 4 && back <= s.size(); ++back) {
    const auto c = static_cast<unsigned char>(s[s.size() - back]);
    if ((c & 0xC0) == 0x80) continue;  // a continuation byte
    const std::size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    return need > back ? s.size() - back : s.size();
  }
  return s.size();  // no lead byte near the end: nothing worth holding
}

void cell_events::output(int stream, std::string_view data) {
  std::string& held = held_[stream == 2 ? 1 : 0];
  held.append(data);
  const std::size_t whole = utf8_whole_prefix(held);
  if (whole == 0) return;
  send(stream == 2 ? "stderr" : "stdout", valid_utf8(std::string_view(held).substr(0, whole)),
       false);
  held.erase(0, whole);
}

void cell_events::flush() {
  for (int i = 0; i < 2; ++i) {
    if (held_[i].empty()) continue;
    send(i ? "stderr" : "stdout", valid_utf8(held_[i]), false);
    held_[i].clear();
  }
}

void cell_events::send(std::string_view event, std::string_view data, bool json) {
  if (!stream_) return;
  if (!stream_->opened()) stream_->open(200, "text/event-stream");
  std::string e = "event: ";
  e += event;
  e += "\ndata: ";
  if (json)
    e += data;
  else
    client::append_json_string(e, data);
  e += "\n\n";
  stream_->write(e);  // a client that stopped reading: the cell still runs to its end
}

}  // namespace dockgate::sidecar::aivory
