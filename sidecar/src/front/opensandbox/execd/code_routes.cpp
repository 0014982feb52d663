// execd's code contexts (POST /code/context, POST /code, DELETE /code, /code/contexts…) over
// the core's code interpreter (core/code_interpreter.hpp: a context is a kept IPython
// kernel in the sandbox). A run answers as a stream of execd's events in execd's order
// (components/execd/pkg/web/controller/sse.go): init (the context's id), stdout/stderr as the
// kernel streams, execution_count then result for a cell's value (a display: result alone),
// error {ename, evalue, traceback}, then execution_complete, and the end of the stream. A
// refusal before the run (unknown context or language, a paused sandbox, a busy context, a
// kernel that cannot start) is a JSON error, never an event.
#include <simdjson.h>

#include "commands/commands.hpp"
#include "core/code_interpreter.hpp"
#include "front/opensandbox/execd/execd_kit.hpp"
#include "front/opensandbox/execd/routes_inside.hpp"
#include "util/util.hpp"

namespace dockgate::sidecar::opensandbox::execd {

namespace {

code_interpreter interpreter_of(session_core& core) {
  return code_interpreter(core.config_of, core.engine, core.registry, core.containers);
}

std::string context_json(const code_context_info& c) {
  std::string b = "{\"id\":";
  client::append_json_string(b, c.id);
  b += ",\"language\":";
  client::append_json_string(b, c.language);
  return b + "}";
}

// An optional string member of `doc`; false when it is there and not a string (or null).
bool optional_string(simdjson::dom::object doc, const char* key, std::string& out) {
  simdjson::dom::element v;
  if (doc.at_key(key).get(v) != simdjson::SUCCESS || v.is_null()) return true;
  std::string_view s;
  if (v.get_string().get(s) != simdjson::SUCCESS) return false;
  out = std::string(s);
  return true;
}

class code_sink final : public code_events {
 public:
  explicit code_sink(const http_request& r) : out_(r) {}
  void started(const std::string& id) override { out_.write(event_text("init", id, unix_ms())); }
  void output(int stream, std::string_view data) override {
    out_.write(event_text(stream == 2 ? "stderr" : "stdout", data, unix_ms()));
  }
  void value(const code_value& v) override {
    if (v.execution_count > 0) out_.write(event_count(v.execution_count, unix_ms()));
    if (!v.data.empty()) out_.write(event_result(v.data, unix_ms()));
  }
  void fault(const code_fault& f) override {
    out_.write(event_error(f.ename, f.evalue, unix_ms(), f.traceback));
  }
  bool listening() const override { return out_.listening(); }
  http_reply end(const code_finished& done) {
    out_.write(event_complete(done.took.count(), unix_ms()));
    return out_.end();
  }

 private:
  event_stream out_;
};

}  // namespace

http_reply create_context(call& c) {
  std::string language = "python", cwd;
  if (!c.r.body.empty()) {
    simdjson::dom::parser parser;
    simdjson::dom::object doc;
    if (parser.parse(c.r.body).get(doc) != simdjson::SUCCESS)
      return bad_request("body is not a JSON object");
    if (!optional_string(doc, "language", language) || !optional_string(doc, "cwd", cwd))
      return bad_request("language and cwd must be strings");
    if (language.empty()) language = "python";
  }
  auto made = interpreter_of(c.core).create(c.sandbox, language, cwd);
  if (!made) return refused(made.error(), "CONTEXT_NOT_FOUND");
  return {200, context_json(made.value())};
}

http_reply run_code(call& c) {
  simdjson::dom::parser parser;
  simdjson::dom::object doc;
  if (parser.parse(c.r.body).get(doc) != simdjson::SUCCESS)
    return bad_request("body is not a JSON object");
  code_run run;
  run.session_id = c.sandbox;
  if (!optional_string(doc, "code", run.code) || run.code.empty())
    return bad_request("code is required (a non-empty string)");
  simdjson::dom::element v;
  if (doc.at_key("context").get(v) == simdjson::SUCCESS && !v.is_null()) {
    simdjson::dom::object context;
    if (v.get_object().get(context) != simdjson::SUCCESS ||
        !optional_string(context, "id", run.context_id) ||
        !optional_string(context, "language", run.language))
      return bad_request("context must be an object {id?, language?} of strings");
  }
  if (run.context_id.empty() && run.language.empty()) {
    // execd's rule: no context and no language is a plain shell command.
    http_request as_command = c.r;
    std::string body = "{\"command\":";
    client::append_json_string(body, run.code);
    as_command.body = body + "}";
    call command{c.core, as_command, c.sandbox, c.id};
    return run_command(command);
  }
  code_sink sink(c.r);
  auto done = interpreter_of(c.core).run(run, sink);
  if (!done) return refused(done.error(), "CONTEXT_NOT_FOUND");
  return sink.end(done.value());
}

http_reply interrupt_code(call& c) {
  auto id = query_value(c.r.query, "id");
  if (!id || id->empty()) return missing_query("id");
  auto stopped = interpreter_of(c.core).interrupt(c.sandbox, *id);
  if (!stopped && stopped.error().kind == refusal_kind::not_found && valid_command_id(*id)) {
    // execd interrupts a command by the same route: not a context, perhaps a command.
    auto killed = commands(c.core.config_of, c.core.engine, c.core.registry).kill(c.sandbox, *id);
    if (killed) return empty_ok();
  }
  if (!stopped) return refused(stopped.error(), "CONTEXT_NOT_FOUND");
  return empty_ok();
}

http_reply list_contexts(call& c) {
  const std::string language = query_value(c.r.query, "language").value_or("");
  auto listed = interpreter_of(c.core).list(c.sandbox, language);
  if (!listed) return refused(listed.error(), "CONTEXT_NOT_FOUND");
  std::string b = "[";
  for (const auto& each : listed.value()) b += (b.size() > 1 ? "," : "") + context_json(each);
  return {200, b + "]"};
}

http_reply delete_contexts(call& c) {
  auto language = query_value(c.r.query, "language");
  if (!language || language->empty()) return missing_query("language");
  auto gone = interpreter_of(c.core).remove_language(c.sandbox, *language);
  if (!gone) return refused(gone.error(), "CONTEXT_NOT_FOUND");
  return empty_ok();
}

http_reply get_context(call& c) {
  auto found = interpreter_of(c.core).get(c.sandbox, std::string(c.id));
  if (!found) return refused(found.error(), "CONTEXT_NOT_FOUND");
  return {200, context_json(found.value())};
}

http_reply delete_context(call& c) {
  auto gone = interpreter_of(c.core).remove(c.sandbox, std::string(c.id));
  if (!gone) return refused(gone.error(), "CONTEXT_NOT_FOUND");
  return empty_ok();
}

}  // namespace dockgate::sidecar::opensandbox::execd
