// The Aivory front's session routes over a session core on the fake engine: each body
// parsed once (the 422 FastAPI shapes, the 400s), the core's results and refusals written
// byte-for-byte as the Aivory sidecar answers them.
#include <simdjson.h>

#include <catch2/catch.hpp>

#include "core/session_core.hpp"
#include "engine/labels.hpp"
#include "fake_engine.hpp"
#include "front/aivory/routes.hpp"

using namespace dockgate::sidecar;

namespace {

config plain() {
  config c;
  c.warm_pool = 0;
  c.cell_runner = false;  // the workspace made by one exec of the fake
  return c;
}

struct front_rig {
  explicit front_rig(config cfg = plain()) : c(std::move(cfg)) {}
  config c;
  testing::fake_engine engine;
  session_core core{c, engine, nullptr};

  http_reply call(const std::string& method, const std::string& path, const std::string& body) {
    http_request r;
    r.method = method;
    r.path = path;
    r.body = body;
    return aivory::serve(core, r);
  }
};

}  // namespace

TEST_CASE("aivory sessions: POST /sessions answers the session and its restore", "[front]") {
  front_rig f;
  auto made = f.call("POST", "/sessions", "");
  REQUIRE(made.status == 200);
  const std::string prefix = R"({"session_id":")";
  REQUIRE(made.body.starts_with(prefix));
  const std::string sid = made.body.substr(prefix.size(), 32);
  CHECK(made.body == prefix + sid + R"(","restore":{"status":"none","skipped":[]}})");
  CHECK(f.engine.find(std::string(container_prefix) + sid));
  CHECK(f.call("DELETE", "/sessions/" + sid, "{}").body == R"({"ok":true})");
  CHECK_FALSE(f.engine.find(std::string(container_prefix) + sid));
  // Idempotent.
  auto again = f.call("DELETE", "/sessions/" + sid, "");
  CHECK(again.status == 200);
  CHECK(again.body == R"({"ok":true})");
}

TEST_CASE("aivory sessions: what the body says is checked before anything is made", "[front]") {
  front_rig f;
  struct row {
    const char* body;
    unsigned status;
    const char* answer;
  };
  const row table[] = {
      {"[1]", 422,
       R"({"detail":[{"loc":["body","body"],"msg":"value is not a valid JSON object","type":"value_error.jsondecode"}]})"},
      {R"({"idle_ttl_sec":"soon"})", 422,
       R"({"detail":[{"loc":["body","idle_ttl_sec"],"msg":"value is not a valid integer","type":"type_error.integer"}]})"},
      {R"({"archive_key":7})", 422,
       R"({"detail":[{"loc":["body","archive_key"],"msg":"str type expected","type":"type_error.str"}]})"},
      {R"({"kernel":"ruby"})", 400, R"x({"detail":"unknown kernel: ruby (known: python)"})x"},
      {R"({"storage":"s3"})", 400, R"({"detail":"storage must be an object"})"},
  };
  for (const auto& r : table) {
    CAPTURE(r.body);
    auto answer = f.call("POST", "/sessions", r.body);
    CHECK(answer.status == r.status);
    CHECK(answer.body == r.answer);
  }
  CHECK(f.engine.count("create") == 0);
  auto bad_id = f.call("DELETE", "/sessions/ABC", "{}");
  CHECK(bad_id.status == 400);
  CHECK(bad_id.body == R"({"detail":"invalid session_id"})");
  auto bad_key = f.call("DELETE", "/sessions/" + std::string(32, 'a'), R"({"archive_key":[]})");
  CHECK(bad_key.status == 422);
  CHECK(
      bad_key.body ==
      R"({"detail":[{"loc":["body","archive_key"],"msg":"str type expected","type":"type_error.str"}]})");
}

TEST_CASE("aivory sessions: the core's refusals in the Aivory shapes", "[front]") {
  SECTION("no image yet: 503") {
    front_rig f;
    f.engine.image_present = false;
    auto answer = f.call("POST", "/sessions", "{}");
    CHECK(answer.status == 503);
    CHECK(answer.body == R"({"detail":"sandbox image not available yet: aivory-sandbox:latest"})");
  }
  SECTION("at SANDBOX_MAX_SESSIONS: 429") {
    config c = plain();
    c.max_sessions = 1;
    front_rig f(c);
    REQUIRE(f.call("POST", "/sessions", "{}").status == 200);
    auto answer = f.call("POST", "/sessions", "{}");
    CHECK(answer.status == 429);
    CHECK(answer.body == R"({"detail":"too many active sessions"})");
  }
  SECTION("the engine refuses the create: 500") {
    front_rig f;
    f.engine.fail("create", 500, "no space");
    auto answer = f.call("POST", "/sessions", "{}");
    CHECK(answer.status == 500);
    CHECK(answer.body == R"({"detail":"docker run failed: {\"message\":\"no space\"}"})");
  }
}

TEST_CASE("aivory sessions: a known kernel is created under its own name", "[front]") {
  front_rig f;
  f.core.executors.start_kernel = [](session&) { return std::string(); };
  auto made = f.call("POST", "/sessions", R"({"kernel":"python3"})");
  REQUIRE(made.status == 200);
  const std::string sid = made.body.substr(15, 32);
  auto k = f.engine.find(std::string(container_prefix) + sid);
  REQUIRE(k);
  CHECK(k->labels.at(std::string(kernel_label)) == "python");
}

TEST_CASE(
    "aivory sessions: `runtime` picks one of SANDBOX_RUNTIMES, written in the create body and "
    "the labels, anything else is 400 with the list, nothing made",
    "[front][runtime]") {
  config c = plain();
  c.runtimes = {"runc", "runsc"};
  front_rig f(c);
  const struct {
    const char* body;
    unsigned status;
    const char* answer;
  } table[] = {
      {R"({"runtime":"kata"})", 400,
       R"x({"detail":"runtime kata is not offered (offered: runc, runsc)"})x"},
      {R"({"runtime":"RUNSC"})", 400,
       R"x({"detail":"runtime RUNSC is not offered (offered: runc, runsc)"})x"},
      {R"({"kernel":"python","runtime":"runsc"})", 400,
       R"x({"detail":"kernel sessions are not offered on runtime runsc (gVisor): a cell could reach the kernel driver's pipes through /proc there"})x"},
      {R"({"runtime":1})", 422,
       R"({"detail":[{"loc":["body","runtime"],"msg":"str type expected","type":"type_error.str"}]})"},
  };
  for (const auto& r : table) {
    CAPTURE(r.body);
    auto answer = f.call("POST", "/sessions", r.body);
    CHECK(answer.status == r.status);
    CHECK(answer.body == r.answer);
  }
  CHECK(f.engine.count("create") == 0);
  auto runtime_of = [](front_rig& rig, const std::string& made) {
    auto k = rig.engine.find(std::string(container_prefix) + made.substr(15, 32));
    REQUIRE(k);
    simdjson::dom::parser p;
    std::string_view runtime;
    if (p.parse(k->body)["HostConfig"]["Runtime"].get(runtime) != simdjson::SUCCESS)
      return std::string("<none>");
    auto label = k->labels.find(std::string(runtime_label));
    return std::string(runtime) + " " +
           (label == k->labels.end() ? std::string("<no label>") : label->second);
  };
  auto gvisor = f.call("POST", "/sessions", R"({"runtime":"runsc"})");
  REQUIRE(gvisor.status == 200);
  CHECK(runtime_of(f, gvisor.body) == "runsc runsc");
  auto asked_default = f.call("POST", "/sessions", R"({"runtime":"runc"})");
  REQUIRE(asked_default.status == 200);
  CHECK(runtime_of(f, asked_default.body) == "runc <no label>");
  auto none = f.call("POST", "/sessions", "{}");
  REQUIRE(none.status == 200);
  CHECK(runtime_of(f, none.body) == "runc <no label>");
  // With no SANDBOX_RUNTIMES, today's create: no Runtime, and none may be asked.
  front_rig engines_default;
  CHECK(
      engines_default.call("POST", "/sessions", R"({"runtime":"runc"})").body ==
      R"x({"detail":"runtime runc is not offered (this sidecar offers none: SANDBOX_RUNTIMES is empty)"})x");
  CHECK(runtime_of(engines_default, engines_default.call("POST", "/sessions", "{}").body) ==
        "<none>");
}

TEST_CASE("aivory sessions: runsc with SANDBOX_NETWORK=allowlist is refused with the reason",
          "[front][runtime]") {
  config c = plain();
  c.runtimes = {"runc", "runsc"};
  c.network = "allowlist";
  front_rig f(c);
  auto answer = f.call("POST", "/sessions", R"({"runtime":"runsc"})");
  CHECK(answer.status == 400);
  CHECK(
      answer.body ==
      R"x({"detail":"runtime runsc (gVisor) cannot serve SANDBOX_NETWORK=allowlist: its sandbox has no network of its own (runsc --network=none), so the egress proxy is out of its reach"})x");
  CHECK(f.engine.calls().empty());
}
