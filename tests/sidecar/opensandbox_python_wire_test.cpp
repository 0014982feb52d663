// OpenSandbox's Python SDK on the wire, where it differs from the JS SDK (research note
// §4; the JS SDK itself drives the integration tests): the requests it sends, written out
// byte for byte since no Python SDK is installed here, sent to the OpenSandbox front over a
// session core on the fake engine, and the answers judged as the Python SDK reads them.
//   - create with `"timeout": null` (manual cleanup: no expiry) and no `extensions`;
//   - both endpoint GETs and execd's /ping through the proxy path, as at every create;
//   - `write_files`: ONE multipart POST /files/upload with every metadata/file pair,
//     metadata with explicit null owner/group/mode, the file part's filename the full path;
//   - its user agent OpenSandbox-Python-SDK/<v>, no OPEN-SANDBOX-CLIENT-IP header.
// The lifecycle and execd rigs are their test files' own (anonymous namespaces): this file
// has a small one of its own.
#include <simdjson.h>

#include <catch2/catch.hpp>
#include <mutex>
#include <string>
#include <vector>

#include "core/session_core.hpp"
#include "engine/labels.hpp"
#include "fake_engine.hpp"
#include "files/sandbox_files.hpp"
#include "front/opensandbox/access_token.hpp"
#include "front/opensandbox/routes.hpp"
#include "util/ids.hpp"

using namespace dockgate;
using namespace dockgate::sidecar;

namespace {

const std::string key = "py-sdk-key";
const std::string user_agent = "OpenSandbox-Python-SDK/0.1.13";

// Sandbox.create("python:3.12-slim", timeout=None): the JS SDK's default body (note §3.1)
// but for `"timeout": null` sent and `extensions` left out, as Python's json.dumps spaces it.
const std::string python_create_body =
    R"({"image": {"uri": "python:3.12-slim"}, "entrypoint": ["tail", "-f", "/dev/null"], )"
    R"("resourceLimits": {"cpu": "1", "memory": "2Gi"}, "secureAccess": false, "env": {}, )"
    R"("metadata": {}, "timeout": null})";

struct python_sdk {
  config c = [] {
    config made;
    made.warm_pool = 0;
    made.cell_runner = false;  // the workspace made by one exec of the fake
    made.api_key = key;
    made.images = {"python:3.12-slim"};
    return made;
  }();
  testing::fake_engine engine;
  session_core core{c, engine, nullptr};
  std::mutex m;
  std::vector<client::exec_options> execs;  // execs asked after record() (no callback)

  // A request as the Python SDK sends it: the key and its user agent on every request,
  // lifecycle and execd alike, and no client-IP header.
  http_reply call(const std::string& method, const std::string& target,
                  const std::string& body = {}, header_fields more = {}) {
    http_request r;
    r.method = method;
    const auto q = target.find('?');
    r.path = target.substr(0, q);
    if (q != std::string::npos) r.query = target.substr(q + 1);
    r.body = body;
    r.fields = {{"host", "sidecar.local:8000"},
                {"open-sandbox-api-key", key},
                {"user-agent", user_agent},
                {"accept", "*/*"}};
    for (auto& f : more) r.fields.push_back(std::move(f));
    if (!body.empty() && !r.field("content-type"))
      r.fields.push_back({"content-type", "application/json"});
    return opensandbox::serve(core, r);
  }
  // A request to execd on the proxy path, with the endpoint's headers sent back.
  http_reply execd(const std::string& id, const std::string& method, const std::string& rest,
                   const std::string& body = {}, header_fields more = {}) {
    more.push_back({"x-execd-access-token", opensandbox::access_token(c, id)});
    return call(method, "/v1/sandboxes/" + id + "/proxy/44772" + rest, body, std::move(more));
  }
  // Every exec from now on recorded and answered exit 0.
  void record() {
    engine.on_exec = [this](const testing::fake_engine::container&, const client::exec_options& o) {
      std::lock_guard g(m);
      execs.push_back(o);
      execs.back().on_output = nullptr;
      client::exec_result r;
      r.started = true;
      r.exit_code = 0;
      return r;
    };
  }
};

struct json {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  explicit json(const std::string& text) {
    REQUIRE(parser.parse(text).get(doc) == simdjson::SUCCESS);
  }
};

std::string header(const http_reply& r, std::string_view name) {
  for (const auto& [n, v] : r.headers)
    if (n == name) return v;
  return "<none>";
}

// httpx's multipart body for `files=[("metadata", ("metadata", json, "application/json")),
// ("file", (path, bytes, "application/octet-stream")), …]`: one pair per file, in order.
struct py_file {
  std::string metadata, path, bytes;
};
const std::string boundary = "8c5f2a9e0b7d4c1fa3e6b9d2c5f8a1e4";
std::string python_upload_body(const std::vector<py_file>& files) {
  std::string b;
  for (const auto& f : files)
    b += "--" + boundary +
         "\r\nContent-Disposition: form-data; name=\"metadata\"; filename=\"metadata\"\r\n"
         "Content-Type: application/json\r\n\r\n" +
         f.metadata + "\r\n--" + boundary +
         "\r\nContent-Disposition: form-data; name=\"file\"; filename=\"" + f.path +
         "\"\r\nContent-Type: application/octet-stream\r\n\r\n" + f.bytes + "\r\n";
  return b + "--" + boundary + "--\r\n";
}
std::string null_metadata(const std::string& path) {
  return R"({"path": ")" + path + R"(", "owner": null, "group": null, "mode": null})";
}

}  // namespace

TEST_CASE(
    "opensandbox python SDK: create with timeout null and no extensions is a sandbox without "
    "expiry, then both endpoints and execd's ping answer as at every create",
    "[opensandbox][python]") {
  python_sdk sdk;
  auto made = sdk.call("POST", "/v1/sandboxes", python_create_body);
  INFO(made.body);
  REQUIRE(made.status == 202);
  CHECK(header(made, "X-Request-ID") != "<none>");
  json answer(made.body);
  std::string_view id, state;
  REQUIRE(answer.doc["id"].get(id) == simdjson::SUCCESS);
  CHECK(valid_session_id(id));
  CHECK(answer.doc["status"]["state"].get(state) == simdjson::SUCCESS);
  CHECK(state == "Running");
  // No expiry: expiresAt omitted (as OpenSandbox's server omits a null), none on the
  // container, none in the sandbox's record, and nothing to renew.
  CHECK(answer.doc["expiresAt"].error() == simdjson::NO_SUCH_FIELD);
  std::string_view created;
  CHECK(answer.doc["createdAt"].get(created) == simdjson::SUCCESS);
  const std::string sid(id);
  auto k = sdk.engine.find(std::string(container_prefix) + sid);
  REQUIRE(k);
  auto expiry = k->labels.find(std::string(expires_label));
  CHECK((expiry == k->labels.end() || expiry->second == "0"));
  auto got = sdk.call("GET", "/v1/sandboxes/" + sid);
  CHECK(got.status == 200);
  CHECK(got.body.find("expiresAt") == std::string::npos);
  CHECK(sdk.call("POST", "/v1/sandboxes/" + sid + "/renew-expiration",
                 R"({"expiresAt": "2200-01-01T00:00:00.000000+00:00"})")
            .status == 409);

  // Then, as at every create and resume: execd's endpoint and the egress one, each with
  // the sandbox's token in its headers, and /ping until 2xx.
  for (const std::string port : {"44772", "18080"}) {
    CAPTURE(port);
    auto endpoint =
        sdk.call("GET", "/v1/sandboxes/" + sid + "/endpoints/" + port + "?use_server_proxy=true");
    CHECK(endpoint.status == 200);
    CHECK(endpoint.body == R"({"endpoint":"sidecar.local:8000/v1/sandboxes/)" + sid + "/proxy/" +
                               port + R"(","headers":{"X-EXECD-ACCESS-TOKEN":")" +
                               opensandbox::access_token(sdk.c, sid) + "\"}}");
  }
  auto ping = sdk.execd(sid, "GET", "/ping");
  CHECK(ping.status == 200);
  CHECK(ping.body.empty());

  // The kill at the end of a manual-cleanup sandbox's life.
  CHECK(sdk.call("DELETE", "/v1/sandboxes/" + sid).status == 204);
  CHECK(sdk.call("GET", "/v1/sandboxes/" + sid).status == 404);
}

TEST_CASE(
    "opensandbox python SDK: write_files is ONE multipart upload of every pair, null owner, "
    "group and mode are unset, the file part's full-path filename is not the destination",
    "[opensandbox][python]") {
  python_sdk sdk;
  auto made = sdk.call("POST", "/v1/sandboxes", python_create_body);
  REQUIRE(made.status == 202);
  const std::string sid = made.body.substr(7, 32);  // {"id":"<32 hex>"
  sdk.record();

  // Bytes the framing must not cut: CR LF, a line like the boundary (not it: httpx's
  // random boundary is in no file), NULs; an empty file.
  const std::string binary =
      std::string("\0\x01\r\n--", 6) + boundary.substr(0, 16) + "\r\nnot a part\xff";
  const std::vector<py_file> files = {
      {null_metadata("/workspace/notes/a.txt"), "/workspace/notes/a.txt", "hello from python"},
      {null_metadata("/workspace/data/deep/b.bin"), "/workspace/data/deep/b.bin", binary},
      {null_metadata("/workspace/empty.txt"), "/workspace/empty.txt", ""},
      {R"({"path": "/workspace/run.sh", "owner": null, "group": null, "mode": 755})",
       "/workspace/run.sh", "#!/bin/sh\necho hi\n"},
  };
  auto up = sdk.execd(sid, "POST", "/files/upload", python_upload_body(files),
                      {{"content-type", "multipart/form-data; boundary=" + boundary}});
  INFO(up.body);
  CHECK(up.status == 200);
  // The Python SDK reads the answer only for its status: an empty 200 is what execd sends.
  CHECK(up.body.empty());
  CHECK(header(up, "X-Request-ID") != "<none>");

  // Each pair written in order by the workspace script as the session user: the metadata's
  // path, no owner or group (null), the mode left as made (null: 0) or as asked.
  REQUIRE(sdk.execs.size() == files.size());
  const std::string max = std::to_string(sdk.c.max_upload_bytes);
  const std::vector<std::vector<std::string>> args = {
      {"write", "notes/a.txt", max, "0", "", ""},
      {"write", "data/deep/b.bin", max, "0", "", ""},
      {"write", "empty.txt", max, "0", "", ""},
      {"write", "run.sh", max, "755", "", ""}};
  for (std::size_t i = 0; i < files.size(); ++i) {
    CAPTURE(i);
    const auto& e = sdk.execs[i];
    REQUIRE(e.cmd.size() == 10);
    CHECK(e.cmd[0] == "sh");
    CHECK(std::vector<std::string>(e.cmd.begin() + 4, e.cmd.end()) == args[i]);
    CHECK(e.stdin_data == files[i].bytes);
    CHECK(e.user == "1000:1000");
  }
  CHECK(sandbox_upload{}.mode == 0);

  // A file part's filename naming another place changes nothing: the metadata's path is
  // the destination (the Python SDK always sends the same path in both).
  sdk.execs.clear();
  auto other =
      sdk.execd(sid, "POST", "/files/upload",
                python_upload_body({{null_metadata("/workspace/here.txt"), "/etc/passwd", "x"}}),
                {{"content-type", "multipart/form-data; boundary=" + boundary}});
  CHECK(other.status == 200);
  REQUIRE(sdk.execs.size() == 1);
  CHECK(sdk.execs[0].cmd[5] == "here.txt");

  // A pair outside /workspace is execd's {code, message} 400, which the SDK raises.
  auto refused =
      sdk.execd(sid, "POST", "/files/upload",
                python_upload_body({{null_metadata("/workspace/ok.txt"), "/workspace/ok.txt", "1"},
                                    {null_metadata("/etc/x"), "/etc/x", "2"}}),
                {{"content-type", "multipart/form-data; boundary=" + boundary}});
  CHECK(refused.status == 400);
  json err(refused.body);
  std::string_view code;
  CHECK(err.doc["code"].get(code) == simdjson::SUCCESS);
  CHECK(code == "INVALID_REQUEST_BODY");
}

TEST_CASE(
    "opensandbox python SDK: its user agent and no client-IP header are served as the JS "
    "SDK's, the key still needed",
    "[opensandbox][python]") {
  python_sdk sdk;
  auto made = sdk.call("POST", "/v1/sandboxes", python_create_body);
  REQUIRE(made.status == 202);
  const std::string sid = made.body.substr(7, 32);
  // The same requests with the JS SDK's user agent and client-IP header get the same
  // answers but for the request id and times.
  auto py = sdk.call("GET", "/v1/sandboxes/" + sid + "/endpoints/44772?use_server_proxy=true");
  auto js = sdk.call(
      "GET", "/v1/sandboxes/" + sid + "/endpoints/44772?use_server_proxy=true", {},
      {{"user-agent", "OpenSandbox-JS-SDK/0.1.11"}, {"open-sandbox-client-ip", "10.0.0.7"}});
  CHECK(py.status == 200);
  CHECK(py.body == js.body);
  auto listed = sdk.call("GET", "/v1/sandboxes?state=Running&page=1&pageSize=10");
  CHECK(listed.status == 200);
  CHECK(listed.body.find(sid) != std::string::npos);
  // The key is the key whatever the user agent.
  http_request no_key;
  no_key.method = "GET";
  no_key.path = "/v1/sandboxes";
  no_key.fields = {{"user-agent", user_agent}};
  auto refused = opensandbox::serve(sdk.core, no_key);
  CHECK(refused.status == 401);
  CHECK(refused.body ==
        R"({"code":"MISSING_API_KEY","message":"the OPEN-SANDBOX-API-KEY header is missing"})");
  // Its user agent on execd's path is served like any other.
  CHECK(sdk.execd(sid, "GET", "/ping").status == 200);
}
