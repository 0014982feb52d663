// execd's commands (POST /command, its background commands' status, logs and interrupt)
// over the commands room. A foreground command answers as a stream of execd's events:
// init (its id), stdout/stderr as they come, then execution_complete (exit 0) or error
// (CommandExecError, the exit code) and the end of the stream.
#include <simdjson.h>

#include <chrono>
#include <thread>

#include "commands/commands.hpp"
#include "front/opensandbox/execd/execd_kit.hpp"
#include "front/opensandbox/execd/execd_routes.hpp"
#include "front/opensandbox/execd/routes_inside.hpp"
#include "util/util.hpp"

namespace dockgate::sidecar::opensandbox::execd {

namespace {

commands commands_of(session_core& core) {
  return commands(core.config_of, core.engine, core.registry);
}

struct parsed_command {
  command_run run;
  bool background = false;
  std::optional<http_reply> error;
};

// execd's RunCommandRequest; uid/gid refused (every command runs as the session user).
parsed_command parse_command(const std::string& body, const std::string& sandbox) {
  parsed_command p;
  p.run.session_id = sandbox;
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.parse(body).get(doc) != simdjson::SUCCESS || !doc.is_object())
    return p.error = bad_request("body is not a JSON object"), p;
  std::string_view s;
  if (doc["command"].get_string().get(s) != simdjson::SUCCESS || s.empty())
    return p.error = bad_request("command is required (a non-empty string)"), p;
  p.run.command = std::string(s);
  simdjson::dom::element v;
  if (doc.at_key("cwd").get(v) == simdjson::SUCCESS && !v.is_null()) {
    if (v.get_string().get(s) != simdjson::SUCCESS)
      return p.error = bad_request("cwd must be a string"), p;
    p.run.cwd = std::string(s);
  }
  if (doc.at_key("background").get(v) == simdjson::SUCCESS && !v.is_null() &&
      v.get_bool().get(p.background) != simdjson::SUCCESS)
    return p.error = bad_request("background must be a boolean"), p;
  if (doc.at_key("timeout").get(v) == simdjson::SUCCESS && !v.is_null()) {
    std::int64_t ms = 0;
    if (v.get_int64().get(ms) != simdjson::SUCCESS || ms < 1)
      return p.error = bad_request("timeout must be an integer of milliseconds >= 1"), p;
    p.run.timeout_ms = ms;
  }
  for (const char* forced : {"uid", "gid"})
    if (doc.at_key(forced).get(v) == simdjson::SUCCESS && !v.is_null())
      return p.error = bad_request(std::string(forced) +
                                   " is not accepted: every command runs as the sandbox's user"),
             p;
  simdjson::dom::object envs;
  if (doc.at_key("envs").get(v) == simdjson::SUCCESS && !v.is_null()) {
    if (v.get_object().get(envs) != simdjson::SUCCESS)
      return p.error = bad_request("envs must be an object of strings"), p;
    for (auto [k, val] : envs) {
      if (k.empty() || k.find('=') != std::string_view::npos ||
          k.find('\0') != std::string_view::npos || val.get_string().get(s) != simdjson::SUCCESS)
        return p.error = bad_request("envs must map names (no '=') to strings"), p;
      p.run.envs[std::string(k)] = std::string(s);
    }
  }
  return p;
}

// A command's events on execd's stream.
class event_sink final : public command_events {
 public:
  explicit event_sink(const http_request& r) : out_(r) {}
  void started(const std::string& id) override { write(event_text("init", id, unix_ms())); }
  void output(int stream, std::string_view data) override {
    write(event_text(stream == 2 ? "stderr" : "stdout", data, unix_ms()));
  }
  // execd's keep-alive: a `ping` event ("pong") every 3 s of silence after init.
  void idle() override { write(event_text("ping", "pong", unix_ms())); }
  bool listening() const override { return out_.listening(); }
  void write(const std::string& event) { out_.write(event); }
  http_reply end() { return out_.end(); }

 private:
  event_stream out_;
};

http_reply finish(event_sink& sink, const command_finished& done);

}  // namespace

http_reply run_command(call& c) {
  auto p = parse_command(c.r.body, c.sandbox);
  if (p.error) return *p.error;
  event_sink sink(c.r);
  const auto cmds = commands_of(c.core);
  if (p.background) {
    auto id = cmds.start(p.run);
    if (!id) return refused(id.error(), "CONTEXT_NOT_FOUND");
    sink.started(id.value());
    sink.write(event_complete(0, unix_ms()));
    return sink.end();
  }
  auto done = cmds.run(p.run, sink);
  if (!done) return refused(done.error(), "CONTEXT_NOT_FOUND");
  return finish(sink, done.value());
}

namespace {

// The end of a foreground command's stream: its last event.
http_reply finish(event_sink& sink, const command_finished& done) {
  if (!done.start_error.empty())
    sink.write(event_error("CommandExecError", done.start_error, unix_ms()));
  else if (done.exit_code == 0)
    sink.write(event_complete(done.took.count(), unix_ms()));
  else
    sink.write(event_error("CommandExecError", std::to_string(done.exit_code), unix_ms()));
  return sink.end();
}

}  // namespace

http_reply create_shell(call& c) {
  std::string cwd;
  if (!c.r.body.empty()) {
    simdjson::dom::parser parser;
    simdjson::dom::element doc, v;
    std::string_view s;
    if (parser.parse(c.r.body).get(doc) != simdjson::SUCCESS || !doc.is_object())
      return bad_request("body is not a JSON object");
    if (doc.at_key("cwd").get(v) == simdjson::SUCCESS && !v.is_null()) {
      if (v.get_string().get(s) != simdjson::SUCCESS) return bad_request("cwd must be a string");
      cwd = std::string(s);
    }
  }
  auto id = commands_of(c.core).create_shell(c.sandbox, cwd);
  if (!id) return refused(id.error(), "CONTEXT_NOT_FOUND");
  std::string b = "{\"session_id\":";
  client::append_json_string(b, id.value());
  return {200, b + "}"};
}

http_reply run_in_shell(call& c) {
  auto p = parse_command(c.r.body, c.sandbox);
  if (p.error) return *p.error;
  if (p.background) return bad_request("a session's command runs in the foreground");
  event_sink sink(c.r);
  auto done = commands_of(c.core).run_in_shell(std::string(c.id), p.run, sink);
  if (!done) return refused(done.error(), "CONTEXT_NOT_FOUND");
  return finish(sink, done.value());
}

http_reply delete_shell(call& c) {
  auto gone = commands_of(c.core).delete_shell(c.sandbox, std::string(c.id));
  if (!gone) return refused(gone.error(), "CONTEXT_NOT_FOUND");
  return empty_ok();
}

http_reply command_status(call& c) {
  auto st = commands_of(c.core).status(c.sandbox, std::string(c.id));
  if (!st) return refused(st.error(), "CONTEXT_NOT_FOUND");
  std::string b = "{\"id\":";
  client::append_json_string(b, st->id);
  b += ",\"content\":";
  client::append_json_string(b, valid_utf8(st->content));
  b += std::string(",\"running\":") + (st->running ? "true" : "false");
  b += ",\"exit_code\":" + (st->exit_code ? std::to_string(*st->exit_code) : "null");
  b += ",\"started_at\":";
  client::append_json_string(b, st->started_at);
  if (!st->finished_at.empty()) {
    b += ",\"finished_at\":";
    client::append_json_string(b, st->finished_at);
  }
  return {200, b + "}"};
}

http_reply command_logs(call& c) {
  std::int64_t cursor = 0;
  if (auto text = query_value(c.r.query, "cursor"); text && !text->empty()) {
    char* end = nullptr;
    cursor = std::strtoll(text->c_str(), &end, 10);
    if (*end != '\0' || cursor < 0) return bad_request("cursor must be an integer >= 0");
  }
  auto logs = commands_of(c.core).logs(c.sandbox, std::string(c.id), cursor);
  if (!logs) return refused(logs.error(), "CONTEXT_NOT_FOUND");
  http_reply reply(200, std::move(logs->text));
  reply.content_type = "text/plain; charset=utf-8";
  reply.headers.push_back({"EXECD-COMMANDS-TAIL-CURSOR", std::to_string(logs->next_cursor)});
  return reply;
}

http_reply interrupt_command(call& c) {
  auto id = query_value(c.r.query, "id");
  if (!id || id->empty()) return missing_query("id");
  auto killed = commands_of(c.core).kill(c.sandbox, *id);
  if (!killed) return refused(killed.error(), "CONTEXT_NOT_FOUND");
  return empty_ok();
}

namespace {

std::string metrics_json(const sandbox_metrics& m) {
  char b[256];
  std::snprintf(b, sizeof b,
                "{\"cpu_count\":%lld,\"cpu_used_pct\":%.2f,\"mem_total_mib\":%.2f,"
                "\"mem_used_mib\":%.2f,\"timestamp\":%lld}",
                static_cast<long long>(m.cpu_count), m.cpu_used_pct, m.mem_total_mib,
                m.mem_used_mib, static_cast<long long>(unix_ms()));
  return b;
}

}  // namespace

http_reply metrics(call& c) {
  auto m = commands_of(c.core).metrics(c.sandbox);
  if (!m) return refused(m.error());
  return {200, metrics_json(m.value())};
}

http_reply watch_metrics(call& c) {
  // A sample a second, each one JSON object and a blank line, until the client stops
  // reading or the sandbox goes (or pauses); the first sample's refusal is the answer.
  const auto cmds = commands_of(c.core);
  auto m = cmds.metrics(c.sandbox);
  if (!m) return refused(m.error());
  http_reply reply(200, {}, c.r.stream != nullptr);
  reply.content_type = "text/event-stream";
  reply.headers.push_back({"X-Request-ID", request_id_of(c.r)});
  if (!c.r.stream) {
    reply.body = metrics_json(m.value()) + "\n\n";  // no stream: one sample
    return reply;
  }
  if (!c.r.stream->open(200, "text/event-stream", {{"X-Request-ID", request_id_of(c.r)}}))
    return reply;
  while (m && c.r.stream->write(metrics_json(m.value()) + "\n\n")) {
    std::this_thread::sleep_for(std::chrono::seconds(1));
    m = cmds.metrics(c.sandbox);
  }
  return reply;
}

}  // namespace dockgate::sidecar::opensandbox::execd
