// The OpenSandbox front's lifecycle part over a session core on the fake engine (no
// dockerd): the door (every route at /v1 and at /, /health, the API key, the proxy path's
// access token, X-Request-ID), each create field's 400, the SDK's own default body judged
// by what the engine was asked (image, environment, limits, labels), list filters and
// pages, pause/resume, renew, metadata, endpoints and delete. The real JS SDK against a
// real engine is the integration tests' (the lead's).
#include <simdjson.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "core/session_core.hpp"
#include "dockgate/sidecar/service.hpp"
#include "engine/labels.hpp"
#include "fake_engine.hpp"
#include "front/opensandbox/access_token.hpp"
#include "front/opensandbox/routes.hpp"
#include "front/opensandbox/sandbox_json.hpp"
#include "front/opensandbox/sandbox_routes.hpp"

using namespace dockgate;
using namespace dockgate::sidecar;
using namespace std::chrono_literals;

namespace {

const std::string key = "the-api-key";

config os_config() {
  config c;
  c.warm_pool = 0;
  c.cell_runner = false;  // the workspace made by one exec of the fake
  c.api_key = key;
  c.images = {"python:3.12-slim"};
  return c;
}

// The SDK's body for Sandbox.create({image: "python:3.12-slim"}) (research note §3.1), without
// its volume, field by field.
using fields_list = std::vector<std::pair<std::string, std::string>>;
const fields_list sdk_fields = {{"image", R"({"uri":"python:3.12-slim"})"},
                                {"entrypoint", R"(["tail","-f","/dev/null"])"},
                                {"resourceLimits", R"({"cpu":"1","memory":"2Gi"})"},
                                {"secureAccess", "false"},
                                {"env", "{}"},
                                {"metadata", "{}"},
                                {"extensions", "{}"},
                                {"timeout", "600"}};

// The SDK's body with `changes`: each field's JSON text replaced (or added); "" removes it.
std::string body_with(const fields_list& changes = {}) {
  fields_list fields = sdk_fields;
  for (const auto& [name, value] : changes) {
    auto it =
        std::find_if(fields.begin(), fields.end(), [&](const auto& f) { return f.first == name; });
    if (it == fields.end())
      fields.emplace_back(name, value);
    else
      it->second = value;
  }
  std::string out = "{";
  for (const auto& [name, value] : fields)
    if (!value.empty()) out += (out.size() > 1 ? ",\"" : "\"") + name + "\":" + value;
  return out + "}";
}
const std::string sdk_body = body_with();

struct os_front {
  explicit os_front(config cfg = os_config()) : c(std::move(cfg)) {}
  config c;
  testing::fake_engine engine;
  session_core core{c, engine, nullptr};

  http_reply call(const std::string& method, const std::string& target,
                  const std::string& body = "",
                  header_fields fields = {{"open-sandbox-api-key", key}}) {
    http_request r;
    r.method = method;
    const auto q = target.find('?');
    r.path = target.substr(0, q);
    if (q != std::string::npos) r.query = target.substr(q + 1);
    r.body = body;
    r.fields = std::move(fields);
    return opensandbox::serve(core, r);
  }
  // A sandbox made by the SDK's body with `changes` (body_with).
  std::string create(const fields_list& changes = {}) {
    auto made = call("POST", "/v1/sandboxes", body_with(changes));
    REQUIRE(made.status == 202);
    return made.body.substr(7, 32);  // {"id":"<32 hex>"
  }
};

std::string field_of(const http_reply& r, std::string_view name) {
  for (const auto& [n, v] : r.headers)
    if (n == name) return v;
  return "<none>";
}

std::string os_error(const std::string& code, const std::string& message) {
  return R"({"code":")" + code + R"(","message":")" + message + R"("})";
}
std::string bad(const std::string& message) {
  return os_error("SANDBOX::INVALID_PARAMETER", message);
}

// The JSON answer parsed, for a field's value.
struct json {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  explicit json(const std::string& text) {
    REQUIRE(parser.parse(text).get(doc) == simdjson::SUCCESS);
  }
};

std::string labels_of(const testing::fake_engine& e, const std::string& id,
                      std::string_view label) {
  auto k = e.find(std::string(container_prefix) + id);
  REQUIRE(k);
  auto it = k->labels.find(std::string(label));
  return it == k->labels.end() ? "<none>" : it->second;
}

}  // namespace

TEST_CASE("opensandbox front: claims its own paths and no Aivory one", "[opensandbox]") {
  for (const char* path : {"/health", "/v1", "/v1/sandboxes", "/sandboxes", "/sandboxes/x/pause",
                           "/metrics/events", "/v1/sandboxes/x/proxy/44772/ping"}) {
    CAPTURE(path);
    CHECK(opensandbox::claims(path));
  }
  for (const char* path : {"/healthz", "/sessions", "/exec", "/files", "/files/get", "/storage/put",
                           "/sandboxesx", "/v1x", "/metrics"}) {
    CAPTURE(path);
    CHECK_FALSE(opensandbox::claims(path));
  }
  // The service sends the front's paths to it (its /health needs no engine, no key) and asks
  // its table for their body limits; an Aivory path is as it was.
  config c = os_config();
  c.max_body_bytes = 1000;
  c.max_upload_bytes = 5000;
  c.max_storage_body_bytes = 7000;
  service s(c,
            client::engine({client::transport{
                *common::parse_endpoint("unix:///nonexistent/dockgate-os-test.sock"), nullptr}}));
  http_request health;
  health.method = "GET";
  health.path = "/health";
  auto answer = s.handle(health);
  CHECK(answer.status == 200);
  CHECK(answer.body == R"({"status":"healthy"})");
  CHECK(s.max_body("/v1/sandboxes/" + std::string(32, 'a') + "/proxy/44772/files/upload") ==
        5000 + 65536);
  CHECK(s.max_body("/sandboxes/" + std::string(32, 'a') + "/proxy/44772/files/upload") ==
        5000 + 65536);
  CHECK(s.max_body("/v1/sandboxes") == 1000);
  CHECK(s.max_body("/v1/sandboxes/" + std::string(32, 'a') + "/proxy/44772/command") == 1000);
  CHECK(s.max_body("/storage/put") == 7000);
  http_request aivory;
  aivory.method = "GET";
  aivory.path = "/sessions";
  CHECK(s.handle(aivory).body == R"({"error":"unauthorized"})");
}

TEST_CASE("opensandbox front: every route at /v1 and at /, 404 and 405 as {code, message}",
          "[opensandbox]") {
  os_front f;
  const std::string id = f.create();
  const std::string none = std::string(32, 'b');
  struct row {
    std::string method, path, body;
    unsigned status;
  };
  const std::vector<row> rows = {
      {"GET", "/sandboxes", "", 200},
      {"GET", "/sandboxes/" + id, "", 200},
      {"PATCH", "/sandboxes/" + id + "/metadata", R"({"team":"a"})", 200},
      {"GET", "/sandboxes/" + id + "/endpoints/44772", "", 200},
      {"POST", "/sandboxes/" + id + "/renew-expiration",
       R"({"expiresAt":")" + opensandbox::rfc3339(std::chrono::system_clock::now() + 1h) + "\"}",
       200},
      {"POST", "/sandboxes/" + none + "/pause", "", 404},
      {"POST", "/sandboxes/" + none + "/resume", "", 404},
      {"DELETE", "/sandboxes/" + none, "", 404},
      {"POST", "/metrics/events", R"({"eventType":"sandbox.create"})", 204},
      {"POST", "/sandboxes", "{}", 400},
  };
  for (const char* prefix : {"/v1", ""})
    for (const auto& r : rows) {
      CAPTURE(prefix, r.method, r.path);
      auto answer = f.call(r.method, prefix + r.path, r.body);
      CHECK(answer.status == r.status);
      if (r.status == 404) CHECK(answer.body.starts_with(R"({"code":"SANDBOX::NOT_FOUND")"));
    }
  for (const char* prefix : {"/v1", ""}) {
    auto pause = f.call("POST", std::string(prefix) + "/sandboxes/" + id + "/pause");
    CHECK(pause.status == 202);
    auto resume = f.call("POST", std::string(prefix) + "/sandboxes/" + id + "/resume");
    CHECK(resume.status == 202);
  }
  auto unknown = f.call("GET", "/v1/nope");
  CHECK(unknown.status == 404);
  CHECK(unknown.body == os_error("GENERAL::NOT_FOUND", "no route /v1/nope"));
  CHECK(f.call("GET", "/v1/sandboxes/" + id + "/pause/x").status == 404);
  CHECK(f.call("GET", "/v1/health").status == 404);  // /health is at the root only
  auto other = f.call("PUT", "/v1/sandboxes");
  CHECK(other.status == 405);
  CHECK(other.body ==
        os_error("GENERAL::METHOD_NOT_ALLOWED", "PUT is not allowed on /v1/sandboxes"));
  CHECK(f.call("GET", "/sandboxes/" + id + "/pause").status == 405);
  CHECK(f.call("POST", "/health").status == 405);
  CHECK(f.call("DELETE", "/v1/sandboxes/" + id).status == 204);
  CHECK(f.call("DELETE", "/sandboxes/" + id).status == 404);
}

TEST_CASE("opensandbox front: the API key, and the proxy path's access token instead of it",
          "[opensandbox]") {
  os_front f;
  const std::string id = f.create();
  auto missing = f.call("GET", "/v1/sandboxes", "", {});
  CHECK(missing.status == 401);
  CHECK(missing.body == os_error("MISSING_API_KEY", "the OPEN-SANDBOX-API-KEY header is missing"));
  for (const std::string wrong : {"the-api-kez", "the-api-key ", "", "Bearer the-api-key"}) {
    CAPTURE(wrong);
    auto refused = f.call("GET", "/v1/sandboxes", "", {{"open-sandbox-api-key", wrong}});
    CHECK(refused.status == 401);
    CHECK(refused.body ==
          os_error("INVALID_API_KEY", "the OPEN-SANDBOX-API-KEY header is not the API key"));
  }
  // Aivory's header does not stand in for it.
  CHECK(f.call("GET", "/v1/sandboxes", "", {{"authorization", "Bearer " + key}}).status == 401);
  CHECK(f.call("GET", "/v1/sandboxes").status == 200);
  CHECK(f.call("GET", "/health", "", {}).status == 200);
  CHECK(f.call("POST", "/v1/sandboxes", sdk_body, {}).status == 401);
  CHECK(f.engine.count("create") == 1);  // the unauthenticated create made nothing

  // The proxy path: the sandbox's own token, the API key neither needed nor enough.
  const std::string token = opensandbox::access_token(f.c, id);
  const std::string proxy = "/v1/sandboxes/" + id + "/proxy/";
  const std::string no_token =
      os_error("INVALID_ACCESS_TOKEN",
               "the sandbox's access token (X-EXECD-ACCESS-TOKEN, from GET "
               "/v1/sandboxes/{id}/endpoints/{port}) is missing or wrong");
  auto key_only = f.call("GET", proxy + "44772/ping");
  CHECK(key_only.status == 401);
  CHECK(key_only.body == no_token);
  const std::string other = f.create();
  auto others = f.call("GET", proxy + "44772/ping", "",
                       {{"x-execd-access-token", opensandbox::access_token(f.c, other)}});
  CHECK(others.status == 401);
  CHECK(f.call("GET", proxy + "44772/ping", "", {{"x-execd-access-token", token + "0"}}).status ==
        401);
  CHECK(f.call("GET", proxy + "44772/ping", "", {{"x-execd-access-token", token}}).status != 401);
  auto egress = f.call("GET", "/sandboxes/" + id + "/proxy/18080/policy", "",
                       {{"x-execd-access-token", token}});
  CHECK(egress.status == 501);
  CHECK(egress.body ==
        os_error("NOT_SUPPORTED",
                 "egress API: this sandbox has no network (SANDBOX_NETWORK=none), so no policy"));
  auto app = f.call("GET", proxy + "8080", "", {{"x-execd-access-token", token}});
  // Past the token: the relay is asked of the engine (this fake runs no held exec; the
  // proxy path itself: opensandbox_port_proxy_test.cpp).
  CHECK(app.status == 502);
  CHECK(app.body.find("the fake engine runs no held exec") != std::string::npos);

  SECTION("SANDBOX_ALLOW_NO_AUTH: no key needed, the token still is") {
    config c = os_config();
    c.allow_no_auth = true;
    os_front open(c);
    CHECK(open.call("GET", "/v1/sandboxes", "", {}).status == 200);
    CHECK(open.call("GET", proxy + "8080", "", {}).status == 401);
  }
}

TEST_CASE("opensandbox front: X-Request-ID on every answer, echoed or made", "[opensandbox]") {
  os_front f;
  for (const auto& [method, path] : std::vector<std::pair<std::string, std::string>>{
           {"GET", "/v1/sandboxes"},
           {"GET", "/health"},
           {"GET", "/v1/nope"},
           {"POST", "/v1/sandboxes"},
           {"GET", "/v1/sandboxes/x/proxy/44772/ping"}}) {
    CAPTURE(method, path);
    auto echoed =
        f.call(method, path, "", {{"open-sandbox-api-key", key}, {"x-request-id", "req-1"}});
    CHECK(field_of(echoed, "X-Request-ID") == "req-1");
    auto made = f.call(method, path, "", {{"x-request-id", "  "}});
    const std::string id = field_of(made, "X-Request-ID");
    CHECK(id.size() == 32);
    CHECK(valid_session_id(id));
    CHECK(field_of(f.call(method, path), "X-Request-ID") != id);
  }
  // 401s too.
  CHECK(field_of(f.call("GET", "/v1/sandboxes", "", {{"x-request-id", "r2"}}), "X-Request-ID") ==
        "r2");
}

TEST_CASE("opensandbox create: the SDK's default body creates, as the engine is asked",
          "[opensandbox]") {
  os_front f;
  const auto before = std::chrono::system_clock::now();
  auto made = f.call("POST", "/v1/sandboxes",
                     body_with({{"env", R"({"A_1":"x y","B":"=z"})"},
                                {"metadata", R"({"team":"ml","example.com/run":"r-1"})"}}));
  REQUIRE(made.status == 202);
  json answer(made.body);
  std::string_view id, state, expires, created;
  REQUIRE(answer.doc["id"].get(id) == simdjson::SUCCESS);
  CHECK(valid_session_id(id));
  CHECK(answer.doc["status"]["state"].get(state) == simdjson::SUCCESS);
  CHECK(state == "Running");
  CHECK(simdjson::minify(answer.doc["metadata"]) == R"({"example.com/run":"r-1","team":"ml"})");
  CHECK(simdjson::minify(answer.doc["entrypoint"]) == R"(["tail","-f","/dev/null"])");
  CHECK(answer.doc["image"].error() == simdjson::NO_SUCH_FIELD);  // not in a create's answer
  REQUIRE(answer.doc["expiresAt"].get(expires) == simdjson::SUCCESS);
  REQUIRE(answer.doc["createdAt"].get(created) == simdjson::SUCCESS);
  CHECK(expires.ends_with("Z"));
  auto at = opensandbox::parse_rfc3339(expires);
  REQUIRE(at);
  CHECK(*at >= before + 600s - 1s);
  CHECK(*at <= std::chrono::system_clock::now() + 600s);
  // What the engine was asked: the image, the environment, the caps (1 CPU and 2Gi asked, the
  // caps are 1 and 2g: the caps themselves), the client's labels and the expiry.
  auto k = f.engine.find(std::string(container_prefix) + std::string(id));
  REQUIRE(k);
  json body(k->body);
  std::string_view image;
  CHECK(body.doc["Image"].get(image) == simdjson::SUCCESS);
  CHECK(image == "python:3.12-slim");
  CHECK(simdjson::minify(body.doc["Env"]) == R"(["A_1=x y","B==z"])");
  std::int64_t memory = 0, cpus = 0;
  CHECK(body.doc["HostConfig"]["Memory"].get(memory) == simdjson::SUCCESS);
  CHECK(body.doc["HostConfig"]["NanoCpus"].get(cpus) == simdjson::SUCCESS);
  CHECK(memory == f.c.memory_bytes);
  CHECK(cpus == f.c.nano_cpus);
  CHECK(k->labels.at("sandbox.metadata.team") == "ml");
  CHECK(k->labels.at("sandbox.metadata.example.com/run") == "r-1");
  CHECK(k->labels.at(std::string(image_label)) == "python:3.12-slim");
  CHECK(k->labels.at(std::string(idle_reaped_label)) == "0");
  CHECK(k->labels.at(std::string(expires_label)) ==
        std::to_string(
            std::chrono::duration_cast<std::chrono::seconds>(at->time_since_epoch()).count()));
}

TEST_CASE("opensandbox create: limits below the caps are asked, above them the caps",
          "[opensandbox]") {
  os_front f;
  struct row {
    std::string cpu, memory;
    std::int64_t nano_cpus, memory_bytes;  // 0: the cap
  };
  const std::int64_t cap_cpu = 1000000000, cap_memory = 2LL << 30;
  for (const auto& r : std::vector<row>{{"500m", "512Mi", 500000000, 512LL << 20},
                                        {"0.25", "1G", 250000000, 1000000000},
                                        {"1", "2Gi", 0, 0},
                                        {"4", "64Gi", 0, 0},
                                        {"999m", "1073741824", 999000000, 1LL << 30}}) {
    CAPTURE(r.cpu, r.memory);
    const std::string id = f.create(
        {{"resourceLimits", R"({"cpu":")" + r.cpu + R"(","memory":")" + r.memory + R"("})"}});
    auto k = f.engine.find(std::string(container_prefix) + id);
    REQUIRE(k);
    json body(k->body);
    std::int64_t memory = 0, cpus = 0;
    CHECK(body.doc["HostConfig"]["Memory"].get(memory) == simdjson::SUCCESS);
    CHECK(body.doc["HostConfig"]["NanoCpus"].get(cpus) == simdjson::SUCCESS);
    CHECK(cpus == (r.nano_cpus ? r.nano_cpus : cap_cpu));
    CHECK(memory == (r.memory_bytes ? r.memory_bytes : cap_memory));
  }
  // No limits, no timeout, no image list entry needed for SANDBOX_IMAGE itself.
  const std::string plain = f.create({{"image", R"({"uri":"aivory-sandbox:latest"})"},
                                      {"resourceLimits", "null"},
                                      {"timeout", ""}});
  CHECK(labels_of(f.engine, plain, expires_label) == "<none>");
  CHECK(labels_of(f.engine, plain, image_label) == "<none>");
  auto got = f.call("GET", "/v1/sandboxes/" + plain);
  CHECK(got.body.find("expiresAt") == std::string::npos);
  CHECK(got.body.find(R"("image":{"uri":"aivory-sandbox:latest"})") != std::string::npos);
}

TEST_CASE("opensandbox create: every field's 400, and nothing made", "[opensandbox]") {
  os_front f;
  struct row {
    fields_list changes;
    std::string message;
  };
  const std::vector<row> rows = {
      {{{"image", ""}}, "image: required (snapshots are not offered)"},
      {{{"image", "\"python\""}}, "image: must be an object {uri}"},
      {{{"image", "{}"}}, "image.uri: required, a string"},
      {{{"image", R"({"uri":7})"}}, "image.uri: required, a string"},
      {{{"image", R"({"uri":"evil:latest"})"}},
       "image.uri: evil:latest is not one of the operator's images (SANDBOX_IMAGE, "
       "SANDBOX_IMAGES)"},
      {{{"image", R"({"uri":"python:3.12-slim","auth":{"username":"u","password":"p"}})"}},
       "image.auth: this sidecar pulls no image (the operator's list)"},
      {{{"image", R"({"uri":"python:3.12-slim","tag":"x"})"}}, "image.tag: unknown field"},
      {{{"entrypoint", ""}}, "entrypoint: required, a non-empty array of strings"},
      {{{"entrypoint", "[]"}}, "entrypoint: required, a non-empty array of strings"},
      {{{"entrypoint", "\"tail -f /dev/null\""}},
       "entrypoint: required, a non-empty array of strings"},
      {{{"entrypoint", "[\"sleep\",1]"}}, "entrypoint: required, a non-empty array of strings"},
      {{{"env", "[]"}}, "env: must be an object of strings"},
      {{{"env", R"({"1A":"x"})"}},
       "env: \\\"1A\\\" is not a variable name ([A-Za-z_][A-Za-z0-9_]*)"},
      {{{"env", R"({"A-B":"x"})"}},
       "env: \\\"A-B\\\" is not a variable name ([A-Za-z_][A-Za-z0-9_]*)"},
      {{{"env", R"({"A":1})"}}, "env.A: must be a string"},
      {{{"env", R"({"A":"x\u0000y"})"}}, "env.A: must not hold a NUL character"},
      {{{"metadata", R"({"opensandbox.io/id":"x"})"}},
       "metadata: \\\"opensandbox.io/id\\\": the opensandbox.io/ prefix is reserved"},
      {{{"metadata", R"({"opensandbox.io/entrypoint":"sh"})"}},
       "metadata: \\\"opensandbox.io/entrypoint\\\": the opensandbox.io/ prefix is reserved"},
      {{{"metadata", R"({"a b":"x"})"}},
       "metadata: \\\"a b\\\" is not a label key ([prefix/]name: the name 1-63 of letters, digits, "
       "'-', '_', '.', alphanumeric at both ends; the prefix a DNS subdomain)"},
      {{{"metadata", R"({"Bad_Prefix/x":"y"})"}},
       "metadata: \\\"Bad_Prefix/x\\\" is not a label key ([prefix/]name: the name 1-63 of "
       "letters, digits, '-', '_', '.', alphanumeric at both ends; the prefix a DNS subdomain)"},
      {{{"metadata", R"({"team":"-x"})"}},
       "metadata: \\\"team\\\": its value is not a label value (empty, or 1-63 of letters, digits, "
       "'-', '_', '.', alphanumeric at both ends)"},
      {{{"metadata", R"({"team":1})"}}, "metadata.team: must be a string"},
      {{{"resourceLimits", R"({"cpu":"1","gpu":"1"})"}},
       "resourceLimits.gpu: this sidecar offers no GPU"},
      {{{"resourceLimits", R"({"disk":"1Gi"})"}},
       "resourceLimits.disk: unknown resource (cpu and memory are offered)"},
      {{{"resourceLimits", R"({"cpu":"lots"})"}},
       "resourceLimits.cpu: not a CPU quantity: \\\"lots\\\""},
      {{{"resourceLimits", R"({"cpu":"-1"})"}},
       "resourceLimits.cpu: not a CPU quantity: \\\"-1\\\""},
      {{{"resourceLimits", R"({"cpu":"0"})"}}, "resourceLimits.cpu: not a CPU quantity: \\\"0\\\""},
      {{{"resourceLimits", R"({"cpu":"0x10"})"}},
       "resourceLimits.cpu: not a CPU quantity: \\\"0x10\\\""},
      {{{"resourceLimits", R"({"cpu":"1e3"})"}},
       "resourceLimits.cpu: not a CPU quantity: \\\"1e3\\\""},
      {{{"resourceLimits", R"({"cpu":"1.2.3"})"}},
       "resourceLimits.cpu: not a CPU quantity: \\\"1.2.3\\\""},
      {{{"resourceLimits", R"({"memory":"1e9"})"}},
       "resourceLimits.memory: not a memory quantity: \\\"1e9\\\""},
      {{{"resourceLimits", R"({"memory":"Gi"})"}},
       "resourceLimits.memory: not a memory quantity: \\\"Gi\\\""},
      {{{"resourceLimits", R"({"memory":"2Qi"})"}},
       "resourceLimits.memory: not a memory quantity: \\\"2Qi\\\""},
      {{{"resourceLimits", R"({"memory":2})"}}, "resourceLimits.memory: must be a string"},
      {{{"resourceLimits", "[]"}}, "resourceLimits: must be an object of strings"},
      {{{"timeout", "59"}}, "timeout: at least 60 seconds"},
      {{{"timeout", "\"600\""}},
       "timeout: must be an integer number of seconds, or null (no expiry)"},
      {{{"timeout", "600.5"}},
       "timeout: must be an integer number of seconds, or null (no expiry)"},
      {{{"timeout", "86401"}},
       "timeout: at most 86400 seconds (SANDBOX_MAX_SANDBOX_TIMEOUT_SECONDS)"},
      {{{"networkPolicy", R"({"defaultAction":"deny","egress":[]})"}},
       "networkPolicy: egress is off on this sidecar (SANDBOX_NETWORK=none): a sandbox has no "
       "network, so no policy can be honoured"},
      {{{"networkPolicy", "{}"}},
       "networkPolicy: egress is off on this sidecar (SANDBOX_NETWORK=none): a sandbox has no "
       "network, so no policy can be honoured"},
      {{{"platform", R"({"os":"linux","arch":"arm64"})"}}, "platform: only linux/amd64 is offered"},
      {{{"platform", R"({"os":"windows"})"}}, "platform: only linux/amd64 is offered"},
      {{{"secureAccess", "true"}},
       "secureAccess: not offered (every endpoint already needs the sandbox's access token)"},
      {{{"secureAccess", "\"no\""}}, "secureAccess: must be a boolean"},
      {{{"snapshotId", "\"snap-1\""}}, "snapshotId: snapshots are not offered"},
      {{{"extensions", R"({"access.renew.extend.seconds":"299"})"}},
       "extensions.access.renew.extend.seconds: an integer from 300 to 86400"},
      {{{"extensions", R"({"access.renew.extend.seconds":"86401"})"}},
       "extensions.access.renew.extend.seconds: an integer from 300 to 86400"},
      {{{"extensions", R"({"poolRef":1})"}}, "extensions.poolRef: must be a string"},
      {{{"credentialProxy", R"({"enabled":true})"}}, "credentialProxy: unknown field"},
      {{{"resourceRequests", R"({"cpu":"1"})"}}, "resourceRequests: unknown field"},
      {{{"volumes", "{}"}}, "volumes: must be an array"},
      {{{"volumes", R"([{"name":"ws","pvc":{"claimName":"c"},"mountPath":"/workspace"}])"}},
       "volumes[0]: pvc volumes are not offered (a host volume under SANDBOX_HOST_VOLUME_ROOT is)"},
      {{{"volumes", R"([{"name":"ws","ossfs":{"bucket":"b"},"mountPath":"/workspace"}])"}},
       "volumes[0]: ossfs volumes are not offered (a host volume under SANDBOX_HOST_VOLUME_ROOT "
       "is)"},
      {{{"volumes",
         R"([{"name":"ws","host":{"path":"/mnt/aimem/ws1"},"mountPath":"/workspace"}])"}},
       "volumes[0]: host volumes need SANDBOX_WORKSPACE_MODE=fuse (each is a FUSE workspace)"},
      {{{"volumes",
         R"([{"name":"Ws","host":{"path":"/mnt/aimem/ws1"},"mountPath":"/workspace"}])"}},
       "volumes[0].name: required, a DNS label (1-63 of a-z0-9-)"},
  };
  for (const auto& r : rows) {
    const std::string body = body_with(r.changes);
    CAPTURE(body);
    auto answer = f.call("POST", "/v1/sandboxes", body);
    CHECK(answer.status == 400);
    CHECK(answer.body == bad(r.message));
  }
  CHECK(f.call("POST", "/v1/sandboxes", "[1]").body ==
        bad("the body must be a JSON object (CreateSandboxRequest)"));
  CHECK(f.call("POST", "/v1/sandboxes", R"({"timeout":60,"timeout":61})").body ==
        bad("timeout: given twice"));
  CHECK(f.engine.count("create") == 0);
  // Accepted and ignored: an opaque extension, the renew extension in range, linux/amd64.
  f.create({{"extensions", R"({"access.renew.extend.seconds":"300","x.y":"z"})"},
            {"platform", R"({"os":"linux","arch":"amd64"})"},
            {"env", R"({"DROPPED":null})"},
            {"entrypoint", R"(["sleep","infinity"])"}});
}

namespace {

// A temporary mount command that records its arguments and succeeds (dockgate-mount's place).
struct fake_mount {
  std::filesystem::path dir =
      std::filesystem::temp_directory_path() /
      ("dg-os-mount-" + std::to_string(::getpid()) + "-" + std::to_string(rand()));
  std::filesystem::path log = dir / "calls";
  std::filesystem::path program = dir / "mount.sh";
  fake_mount() {
    std::filesystem::create_directories(dir);
    std::ofstream(program) << "#!/bin/sh\necho \"$@\" >> " << log.string() << "\n";
    std::filesystem::permissions(program, std::filesystem::perms::owner_all);
  }
  ~fake_mount() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  std::string calls() const {
    std::ifstream in(log);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
};

}  // namespace

TEST_CASE("opensandbox create: a host volume under the root is the key's FUSE workspace",
          "[opensandbox]") {
  fake_mount mount;
  config c = os_config();
  c.workspace_mode = "fuse";
  c.host_volume_root = "/mnt/aimem";
  c.mount_command = mount.program.string();
  os_front f(c);
  auto volume = [](const std::string& fields) {
    return "[{\"name\":\"workspace\"," + fields + "}]";
  };
  const std::string id = f.create(
      {{"volumes", volume(R"("host":{"path":"/mnt/aimem/ws1"},"mountPath":"/workspace")")}});
  CHECK(labels_of(f.engine, id, archive_label) == "ws1");
  CHECK(mount.calls() == "mount " + id + " --key ws1\n");
  // Refused with the reason, before anything is mounted or created.
  struct row {
    std::string fields, message;
  };
  const std::string root_rule = "must be /mnt/aimem/<name> (SANDBOX_HOST_VOLUME_ROOT)";
  const std::string key_rule =
      "must be /mnt/aimem/<name>, the name 1-128 of letters, digits, '_' and '-' (a workspace's "
      "key)";
  for (const auto& r : std::vector<row>{
           {R"("host":{"path":"/mnt/aimem/../etc"},"mountPath":"/workspace")",
            "volumes[0].host.path: must not contain '..'"},
           {R"("host":{"path":"/mnt/aimem/ws1/.."},"mountPath":"/workspace")",
            "volumes[0].host.path: must not contain '..'"},
           {R"("host":{"path":"/var/run/docker.sock"},"mountPath":"/workspace")",
            "volumes[0].host.path: " + root_rule},
           {R"("host":{"path":"/mnt/aimemx/ws1"},"mountPath":"/workspace")",
            "volumes[0].host.path: " + root_rule},
           {R"("host":{"path":"/mnt/aimem/a/b"},"mountPath":"/workspace")",
            "volumes[0].host.path: " + key_rule},
           {R"("host":{"path":"/mnt/aimem/"},"mountPath":"/workspace")",
            "volumes[0].host.path: " + key_rule},
           {R"("host":{"path":"/mnt/aimem/ws1"},"mountPath":"/data")",
            "volumes[0].mountPath: must be /workspace (the only path a workspace is bound at)"},
           {R"("host":{"path":"/mnt/aimem/ws1"})",
            "volumes[0].mountPath: must be /workspace (the only path a workspace is bound at)"},
           {R"("host":{"path":"/mnt/aimem/ws1"},"mountPath":"/workspace","subPath":"a")",
            "volumes[0].subPath: not offered (the workspace is the key's whole prefix)"},
           {R"("host":{"path":"/mnt/aimem/ws1"},"mountPath":"/workspace","readOnly":true)",
            "volumes[0].readOnly: only false is offered (the workspace is writable)"},
           {R"("host":{},"mountPath":"/workspace")", "volumes[0].host.path: required, a string"},
           {R"("mountPath":"/workspace")", "volumes[0]: a host volume is required (host: {path})"},
           {R"("host":{"path":"/mnt/aimem/ws1"},"mountPath":"/workspace","extra":1)",
            "volumes[0].extra: unknown field"},
       }) {
    CAPTURE(r.fields);
    auto answer = f.call("POST", "/v1/sandboxes", body_with({{"volumes", volume(r.fields)}}));
    CHECK(answer.status == 400);
    CHECK(answer.body == bad(r.message));
  }
  const std::string ok =
      R"({"name":"a","host":{"path":"/mnt/aimem/ws2"},"mountPath":"/workspace"})";
  auto two = f.call("POST", "/v1/sandboxes", body_with({{"volumes", "[" + ok + "," + ok + "]"}}));
  CHECK(two.body == bad("volumes[1]: only one volume is offered (/workspace)"));
  CHECK(f.engine.count("create") == 1);
  CHECK(mount.calls() == "mount " + id + " --key ws1\n");
  // With readOnly false and an empty volume list too.
  f.create({{"volumes", "[]"}});
}

namespace {

// The ids of a list answer's items, in order, and its pagination object.
std::vector<std::string> ids_of(const http_reply& r) {
  json answer(r.body);
  std::vector<std::string> out;
  for (auto item : answer.doc["items"].get_array()) {
    std::string_view id;
    REQUIRE(item["id"].get(id) == simdjson::SUCCESS);
    out.emplace_back(id);
  }
  return out;
}
std::string pagination_of(const http_reply& r) {
  json answer(r.body);
  return simdjson::minify(answer.doc["pagination"]);
}

}  // namespace

TEST_CASE("opensandbox list: state and metadata filters, pages, newest first", "[opensandbox]") {
  os_front f;
  std::vector<std::string> made;  // oldest first
  for (const char* team : {"a b", "a b", "c", "a b", "c"}) {
    made.push_back(
        f.create({{"metadata", std::string(R"({"team":")") +
                                   (std::string(team) == "a b" ? "ab" : team) + R"(","n":"1"})"}}));
    std::this_thread::sleep_for(2ms);  // distinct creation times
  }
  REQUIRE(f.call("POST", "/v1/sandboxes/" + made[1] + "/pause").status == 202);
  REQUIRE(f.call("POST", "/v1/sandboxes/" + made[4] + "/pause").status == 202);
  const std::vector<std::string> newest_first(made.rbegin(), made.rend());

  auto all = f.call("GET", "/v1/sandboxes");
  REQUIRE(all.status == 200);
  CHECK(ids_of(all) == newest_first);
  CHECK(pagination_of(all) ==
        R"({"page":1,"pageSize":20,"totalItems":5,"totalPages":1,"hasNextPage":false})");
  CHECK(all.body.find(R"("image":{"uri":"python:3.12-slim"})") != std::string::npos);
  // state: repeatable (either), case-insensitive.
  CHECK(ids_of(f.call("GET", "/v1/sandboxes?state=paused")) ==
        std::vector<std::string>{made[4], made[1]});
  CHECK(ids_of(f.call("GET", "/v1/sandboxes?state=RUNNING&state=Paused")) == newest_first);
  CHECK(ids_of(f.call("GET", "/v1/sandboxes?state=Running")) ==
        std::vector<std::string>{made[3], made[2], made[0]});
  CHECK(ids_of(f.call("GET", "/v1/sandboxes?state=Terminated")).empty());
  // metadata: one value k=v&k2=v2, URL-encoded once more (as the SDK sends it).
  CHECK(ids_of(f.call("GET", "/v1/sandboxes?metadata=team%3Dab%26n%3D1")) ==
        std::vector<std::string>{made[3], made[1], made[0]});
  CHECK(ids_of(f.call("GET", "/v1/sandboxes?metadata=team%3Dc&state=paused")) ==
        std::vector<std::string>{made[4]});
  CHECK(ids_of(f.call("GET", "/v1/sandboxes?metadata=team%3Dab%26n%3D2")).empty());
  CHECK(
      ids_of(
          f.call("GET",
                 "/v1/sandboxes?metadata=opensandbox.io%2Fentrypoint%3Dtail%20-f%20%2Fdev%2Fnull"))
          .empty());
  // Pages.
  auto page2 = f.call("GET", "/v1/sandboxes?page=2&pageSize=2");
  CHECK(ids_of(page2) == std::vector<std::string>{made[2], made[1]});
  CHECK(pagination_of(page2) ==
        R"({"page":2,"pageSize":2,"totalItems":5,"totalPages":3,"hasNextPage":true})");
  auto page3 = f.call("GET", "/v1/sandboxes?page=3&pageSize=2");
  CHECK(ids_of(page3) == std::vector<std::string>{made[0]});
  CHECK(pagination_of(page3) ==
        R"({"page":3,"pageSize":2,"totalItems":5,"totalPages":3,"hasNextPage":false})");
  CHECK(ids_of(f.call("GET", "/v1/sandboxes?page=9")).empty());
  CHECK(f.call("GET", "/v1/sandboxes?pageSize=200").status == 200);
  for (const auto& [query, message] : std::vector<std::pair<std::string, std::string>>{
           {"page=0", "page: an integer >= 1"},
           {"page=x", "page: an integer >= 1"},
           {"pageSize=0", "pageSize: an integer from 1 to 200"},
           {"pageSize=201", "pageSize: an integer from 1 to 200"},
           {"metadata=team", "metadata: key=value pairs joined by '&'"},
           {"state=%zz", "the query has a malformed %-escape"}}) {
    CAPTURE(query);
    auto refused = f.call("GET", "/v1/sandboxes?" + query);
    CHECK(refused.status == 400);
    CHECK(refused.body == bad(message));
  }
}

TEST_CASE(
    "opensandbox pause and resume: 202 with no body, 409 in the wrong state, the engine's state",
    "[opensandbox]") {
  os_front f;
  const std::string id = f.create();
  const std::string container = std::string(container_prefix) + id;
  auto paused = f.call("POST", "/v1/sandboxes/" + id + "/pause");
  CHECK(paused.status == 202);
  CHECK(paused.body.empty());  // Content-Length: 0 (the SDK parses anything else as JSON)
  CHECK(f.engine.find(container)->state == "paused");
  CHECK(f.call("GET", "/v1/sandboxes/" + id).body.find(R"("status":{"state":"Paused"})") !=
        std::string::npos);
  auto again = f.call("POST", "/v1/sandboxes/" + id + "/pause");
  CHECK(again.status == 409);
  CHECK(again.body == os_error("SANDBOX::STATE_CONFLICT", "sandbox is paused already"));
  auto resumed = f.call("POST", "/v1/sandboxes/" + id + "/resume");
  CHECK(resumed.status == 202);
  CHECK(resumed.body.empty());
  CHECK(f.engine.find(container)->state == "running");
  auto not_paused = f.call("POST", "/v1/sandboxes/" + id + "/resume");
  CHECK(not_paused.status == 409);
  CHECK(not_paused.body == os_error("SANDBOX::STATE_CONFLICT", "sandbox is not paused"));
  f.engine.fail("pause", 500, "freezer broken");
  auto failed = f.call("POST", "/v1/sandboxes/" + id + "/pause");
  CHECK(failed.status == 502);
  CHECK(failed.body.starts_with(R"({"code":"DOCKER::ENGINE_ERROR")"));
  CHECK(f.engine.find(container)->state == "running");
}

TEST_CASE("opensandbox renew-expiration: 200, 400 in the past or malformed, 409 without expiry",
          "[opensandbox]") {
  os_front f;
  const std::string id = f.create();
  const auto until = std::chrono::system_clock::now() + 2h;
  const std::string asked = opensandbox::rfc3339(until);
  auto renewed = f.call("POST", "/v1/sandboxes/" + id + "/renew-expiration",
                        R"({"expiresAt":")" + asked + "\"}");
  CHECK(renewed.status == 200);
  CHECK(renewed.body == R"({"expiresAt":")" + asked + "\"}");
  CHECK(f.call("GET", "/v1/sandboxes/" + id).body.find(R"("expiresAt":")" + asked + "\"") !=
        std::string::npos);
  // An offset is read as such.
  auto offset = f.call("POST", "/v1/sandboxes/" + id + "/renew-expiration",
                       R"({"expiresAt":"2200-01-01T02:00:00+02:00"})");
  CHECK(offset.body == R"({"expiresAt":"2200-01-01T00:00:00.000Z"})");
  auto past = f.call("POST", "/v1/sandboxes/" + id + "/renew-expiration",
                     R"({"expiresAt":"2020-01-01T00:00:00Z"})");
  CHECK(past.status == 400);
  CHECK(past.body == bad("expiresAt must be in the future"));
  for (const std::string body : {R"({"expiresAt":"tomorrow"})", R"({"expiresAt":1})", "{}",
                                 R"({"expiresAt":"2200-02-30T00:00:00Z"})"}) {
    CAPTURE(body);
    CHECK(f.call("POST", "/v1/sandboxes/" + id + "/renew-expiration", body).body ==
          bad("expiresAt: required, an RFC 3339 date-time"));
  }
  CHECK(f.call("POST", "/v1/sandboxes/" + id + "/renew-expiration",
               R"({"expiresAt":"2200-01-01T00:00:00Z","x":1})")
            .body == bad("x: unknown field"));
  const std::string forever = f.create({{"timeout", ""}});
  auto none = f.call("POST", "/v1/sandboxes/" + forever + "/renew-expiration",
                     R"({"expiresAt":")" + asked + "\"}");
  CHECK(none.status == 409);
  CHECK(none.body ==
        os_error("SANDBOX::STATE_CONFLICT", "sandbox " + forever + " has no expiry to renew"));
}

TEST_CASE("opensandbox metadata: a merge patch, null removes, reserved keys refused",
          "[opensandbox]") {
  os_front f;
  const std::string id = f.create({{"metadata", R"({"team":"ml","stage":"dev"})"}});
  auto patched = f.call("PATCH", "/v1/sandboxes/" + id + "/metadata",
                        R"({"stage":null,"owner":"ana","team":"ops"})");
  CHECK(patched.status == 200);
  json answer(patched.body);
  CHECK(simdjson::minify(answer.doc["metadata"]) == R"({"owner":"ana","team":"ops"})");
  CHECK(simdjson::minify(answer.doc["entrypoint"]) == R"(["tail","-f","/dev/null"])");
  for (const auto& [body, message] : std::vector<std::pair<std::string, std::string>>{
           {R"({"opensandbox.io/entrypoint":null})",
            "metadata: \\\"opensandbox.io/entrypoint\\\": the opensandbox.io/ prefix is reserved"},
           {R"({"a b":"x"})",
            "metadata: \\\"a b\\\" is not a label key ([prefix/]name: the name 1-63 of letters, "
            "digits, '-', '_', '.', alphanumeric at both ends; the prefix a DNS subdomain)"},
           {R"({"team":7})", "metadata.team: a string, or null to remove it"},
           {"[]", "the body must be a JSON object (a JSON merge patch of metadata)"}}) {
    CAPTURE(body);
    auto refused = f.call("PATCH", "/v1/sandboxes/" + id + "/metadata", body);
    CHECK(refused.status == 400);
    CHECK(refused.body == bad(message));
  }
  CHECK(f.call("GET", "/v1/sandboxes/" + id)
            .body.find(R"("metadata":{"owner":"ana","team":"ops"})") != std::string::npos);
}

TEST_CASE("opensandbox endpoints: the proxy path and the sandbox's token, for any port",
          "[opensandbox]") {
  os_front f;
  const std::string id = f.create();
  for (const char* port : {"44772", "18080", "8080", "1", "65535"}) {
    CAPTURE(port);
    auto got =
        f.call("GET", "/v1/sandboxes/" + id + "/endpoints/" + port + "?use_server_proxy=false", "",
               {{"open-sandbox-api-key", key}, {"host", "sidecar.local:8000"}});
    CHECK(got.status == 200);
    CHECK(got.body == R"({"endpoint":"sidecar.local:8000/v1/sandboxes/)" + id + "/proxy/" + port +
                          R"(","headers":{"X-EXECD-ACCESS-TOKEN":")" +
                          opensandbox::access_token(f.c, id) + "\"}}");
  }
  CHECK(opensandbox::access_token(f.c, id) != opensandbox::access_token(f.c, f.create()));
  for (const char* port : {"0", "65536", "http", "-1"}) {
    CAPTURE(port);
    auto refused = f.call("GET", "/v1/sandboxes/" + id + "/endpoints/" + port);
    CHECK(refused.status == 400);
    CHECK(refused.body == bad("port: an integer from 1 to 65535"));
  }
  CHECK(f.call("GET", "/v1/sandboxes/" + id + "/endpoints/8080?expires=1999999999").body ==
        bad("expires: signed endpoints are not offered (the server proxy is)"));
  CHECK(f.call("GET", "/v1/sandboxes/" + std::string(32, 'c') + "/endpoints/44772").status == 404);
}

TEST_CASE("opensandbox delete: 204, the container gone, then 404", "[opensandbox]") {
  os_front f;
  const std::string id = f.create();
  auto deleted = f.call("DELETE", "/v1/sandboxes/" + id);
  CHECK(deleted.status == 204);
  CHECK_FALSE(f.engine.find(std::string(container_prefix) + id));
  auto gone = f.call("DELETE", "/v1/sandboxes/" + id);
  CHECK(gone.status == 404);
  CHECK(gone.body == os_error("SANDBOX::NOT_FOUND", "sandbox " + id + " not found"));
  CHECK(f.call("GET", "/v1/sandboxes/" + id).status == 404);
  CHECK(f.call("GET", "/v1/sandboxes/not-an-id").body ==
        os_error("SANDBOX::NOT_FOUND", "sandbox not found"));
  // A paused sandbox is thawed and ended.
  const std::string frozen = f.create();
  REQUIRE(f.call("POST", "/v1/sandboxes/" + frozen + "/pause").status == 202);
  CHECK(f.call("DELETE", "/v1/sandboxes/" + frozen).status == 204);
  CHECK_FALSE(f.engine.find(std::string(container_prefix) + frozen));
}

TEST_CASE("opensandbox times: RFC 3339 written in UTC with a Z, read with an offset",
          "[opensandbox]") {
  using opensandbox::parse_rfc3339;
  using opensandbox::rfc3339;
  const auto epoch = std::chrono::system_clock::time_point{};
  CHECK(rfc3339(epoch + 1700000000123ms) == "2023-11-14T22:13:20.123Z");
  CHECK(parse_rfc3339("2023-11-14T22:13:20.123Z") == epoch + 1700000000123ms);
  CHECK(parse_rfc3339("2023-11-14T22:13:20Z") == epoch + 1700000000s);
  CHECK(parse_rfc3339("2023-11-15T00:13:20+02:00") == epoch + 1700000000s);
  CHECK(parse_rfc3339("2023-11-14T21:13:20.5-01:00") == epoch + 1700000000500ms);
  for (const char* bad_time :
       {"", "2023-11-14", "2023-11-14T22:13:20", "2023-11-14T22:13:20.Z", "2023-13-14T22:13:20Z",
        "2023-02-30T00:00:00Z", "2023-11-14T22:13:20+2:00", "2023-11-14T22:13:20Zjunk",
        "2999-01-01T00:00:00Z"}) {
    CAPTURE(bad_time);
    CHECK_FALSE(parse_rfc3339(bad_time));
  }
}

TEST_CASE("opensandbox config: SANDBOX_IMAGES, the timeout cap and the host-volume root",
          "[opensandbox]") {
  auto loaded = load_config({{"SANDBOX_ALLOW_NO_AUTH", "1"},
                             {"SANDBOX_IMAGES", " python:3.12-slim, node:22-Alpine ,,"},
                             {"SANDBOX_MAX_SANDBOX_TIMEOUT_SECONDS", "3600"},
                             {"SANDBOX_HOST_VOLUME_ROOT", "/srv/ws"}});
  REQUIRE(loaded.value);
  CHECK(loaded.value->images == std::vector<std::string>{"python:3.12-slim", "node:22-Alpine"});
  CHECK(loaded.value->max_sandbox_timeout_seconds == 3600);
  CHECK(loaded.value->host_volume_root == "/srv/ws");
  const config defaults;
  CHECK(defaults.images.empty());
  CHECK(defaults.max_sandbox_timeout_seconds == 86400);
  CHECK(defaults.host_volume_root == "/mnt/aimem");
  auto refused = load_config({{"SANDBOX_ALLOW_NO_AUTH", "1"},
                              {"SANDBOX_IMAGES", "a b"},
                              {"SANDBOX_HOST_VOLUME_ROOT", "mnt/"}});
  CHECK(refused.errors == std::vector<std::string>{
                              "SANDBOX_IMAGES: not an image reference: \"a b\"",
                              "SANDBOX_HOST_VOLUME_ROOT: must be an absolute path without '..' or "
                              "a trailing '/'"});
}

TEST_CASE("opensandbox create: the core's refusals as {code, message}", "[opensandbox]") {
  SECTION("an image of the list that is not on the engine: 503, nothing pulled") {
    os_front f;
    f.engine.image_present = false;
    auto answer = f.call("POST", "/v1/sandboxes", sdk_body);
    CHECK(answer.status == 503);
    CHECK(answer.body ==
          os_error("SANDBOX::UNAVAILABLE", "image python:3.12-slim is not on the engine"));
    CHECK(f.engine.count("create") == 0);
  }
  SECTION("at SANDBOX_MAX_SESSIONS: 429") {
    config c = os_config();
    c.max_sessions = 1;
    os_front f(c);
    f.create();
    auto answer = f.call("POST", "/v1/sandboxes", sdk_body);
    CHECK(answer.status == 429);
    CHECK(answer.body == os_error("SANDBOX::BUSY", "too many active sessions"));
  }
  SECTION("the engine refuses the create: 500, nothing left") {
    os_front f;
    f.engine.fail("create", 500, "no space");
    auto answer = f.call("POST", "/v1/sandboxes", sdk_body);
    CHECK(answer.status == 500);
    CHECK(answer.body.starts_with(
        R"({"code":"GENERAL::UNKNOWN_ERROR","message":"docker run failed)"));
    CHECK(f.engine.containers().empty());
    CHECK(ids_of(f.call("GET", "/v1/sandboxes")).empty());
  }
}

TEST_CASE("opensandbox front: an answer that set its own X-Request-ID has that one alone",
          "[opensandbox]") {
  // execd's handler (the proxy path) sets the field itself: the door adds no second one.
  os_front f;
  const std::string id = f.create();
  const header_fields token = {{"x-execd-access-token", opensandbox::access_token(f.c, id)}};
  for (const bool sent : {true, false}) {
    CAPTURE(sent);
    header_fields fields = token;
    if (sent) fields.emplace_back("x-request-id", "r9");
    auto answer = f.call("GET", "/v1/sandboxes/" + id + "/proxy/44772/ping", "", fields);
    std::vector<std::string> ids;
    for (const auto& [name, value] : answer.headers)
      if (name == "X-Request-ID" || name == "x-request-id") ids.push_back(value);
    REQUIRE(ids.size() == 1);
    if (sent) CHECK(ids[0] == "r9");
  }
}

TEST_CASE(
    "opensandbox create: an entrypoint is started detached as the session user, one the "
    "image lacks is a 400 and its container removed",
    "[opensandbox]") {
  os_front f;
  std::vector<std::vector<std::string>> started;
  f.engine.on_exec = [&](const testing::fake_engine::container&, const client::exec_options& o) {
    client::exec_result r;
    r.started = true;
    r.exit_code = 0;
    if (o.cmd.size() > 3 && o.cmd[3] == "dockgate-entrypoint") {
      started.push_back(o.cmd);
      CHECK(o.user == "1000:1000");
      if (o.cmd[4] == "no-such-program") r.exit_code = 127;
    }
    return r;
  };
  SECTION("a server as the main process") {
    const std::string id = f.create({{"entrypoint", R"(["python3","-m","http.server","8080"])"}});
    REQUIRE(started.size() == 1);
    CHECK(std::vector<std::string>(started[0].begin() + 4, started[0].end()) ==
          std::vector<std::string>{"python3", "-m", "http.server", "8080"});
    CHECK(started[0][2].find("setsid \"$@\" </dev/null") != std::string::npos);
    auto got = f.call("GET", "/v1/sandboxes/" + id);
    CHECK(got.body.find(R"("entrypoint":["python3","-m","http.server","8080"])") !=
          std::string::npos);
  }
  SECTION("the SDK's keep-alive starts nothing") {
    f.create();
    CHECK(started.empty());
  }
  SECTION("a program the image lacks") {
    auto refused =
        f.call("POST", "/v1/sandboxes", body_with({{"entrypoint", R"(["no-such-program"])"}}));
    CHECK(refused.status == 400);
    CHECK(refused.body.find("entrypoint: no-such-program is not a program of the image") !=
          std::string::npos);
    CHECK(f.engine.count("remove") >= 1);
    CHECK(f.core.registry.size() == 0);
  }
}

TEST_CASE(
    "opensandbox create: extensions.secureRuntime picks one of SANDBOX_RUNTIMES, anything else is "
    "400 with the list before the engine is asked",
    "[opensandbox][runtime]") {
  config c = os_config();
  c.runtimes = {"runc", "runsc"};
  os_front f(c);
  for (const auto& [asked, message] : std::vector<std::pair<std::string, std::string>>{
           {"kata", "extensions.secureRuntime: runtime kata is not offered (offered: runc, runsc)"},
           {"", "extensions.secureRuntime: runtime  is not offered (offered: runc, runsc)"}}) {
    CAPTURE(asked);
    auto refused = f.call("POST", "/v1/sandboxes",
                          body_with({{"extensions", R"({"secureRuntime":")" + asked + "\"}"}}));
    CHECK(refused.status == 400);
    CHECK(refused.body == bad(message));
  }
  CHECK(f.engine.count("create") == 0);
  // Asked: in the create body and the labels; none asked: the default (the first), no label.
  const std::string gvisor = f.create({{"extensions", R"({"secureRuntime":"runsc"})"}});
  auto k = f.engine.find(std::string(container_prefix) + gvisor);
  REQUIRE(k);
  json body(k->body);
  std::string_view runtime;
  CHECK(body.doc["HostConfig"]["Runtime"].get(runtime) == simdjson::SUCCESS);
  CHECK(runtime == "runsc");
  CHECK(labels_of(f.engine, gvisor, runtime_label) == "runsc");
  const std::string plain = f.create();
  json plain_body(f.engine.find(std::string(container_prefix) + plain)->body);
  CHECK(plain_body.doc["HostConfig"]["Runtime"].get(runtime) == simdjson::SUCCESS);
  CHECK(runtime == "runc");
  CHECK(labels_of(f.engine, plain, runtime_label) == "<none>");
  // With no SANDBOX_RUNTIMES: no Runtime in any create, and none may be asked.
  os_front none;
  auto refused = none.call("POST", "/v1/sandboxes",
                           body_with({{"extensions", R"({"secureRuntime":"runc"})"}}));
  CHECK(refused.body == bad("extensions.secureRuntime: runtime runc is not offered (this sidecar "
                            "offers none: SANDBOX_RUNTIMES is empty)"));
  const std::string engines = none.create();
  json engines_body(none.engine.find(std::string(container_prefix) + engines)->body);
  CHECK(engines_body.doc["HostConfig"]["Runtime"].error() == simdjson::NO_SUCH_FIELD);
}
