// The Aivory front over a session core on the fake engine (no dockerd): the route table's
// 404/405 and body limits, each files/storage route's 422 shapes and refusals in the
// Aivory sidecar's exact bodies, the service's 401s, and the files and storage rooms'
// own checks when called without the front. The answers the engine makes are judged by
// tests/integration/sidecar_*_test.cpp.
#include <sys/time.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/session_core.hpp"
#include "dockgate/sidecar/service.hpp"
#include "fake_engine.hpp"
#include "front/aivory/routes.hpp"
#include "storage/objects.hpp"

using namespace dockgate;
using namespace dockgate::sidecar;

namespace {

client::engine nowhere() {
  // The service's client, for its own tests: a socket nobody listens on.
  return client::engine({client::transport{
      *common::parse_endpoint("unix:///nonexistent/dockgate-front-test.sock"), nullptr}});
}

config front_config() {
  config c;
  c.allow_no_auth = true;
  c.max_upload_bytes = 31;  // base64 of at most 44 characters, which decode to 33 bytes
  return c;
}

struct front {
  config c = front_config();
  testing::fake_engine engine;
  session_core core{c, engine, nullptr};

  http_reply call(const std::string& method, const std::string& path, const std::string& body) {
    http_request r;
    r.method = method;
    r.path = path;
    r.body = body;
    return aivory::serve(core, r);
  }
  http_reply post(const std::string& path, const std::string& body) {
    return call("POST", path, body);
  }
};

std::string missing(const std::string& field) {
  return R"({"detail":[{"loc":["body",")" + field +
         R"("],"msg":"field required","type":"value_error.missing"}]})";
}
std::string not_a_string(const std::string& field) {
  return R"({"detail":[{"loc":["body",")" + field +
         R"("],"msg":"str type expected","type":"type_error.str"}]})";
}
const std::string not_json =
    R"({"detail":[{"loc":["body","body"],"msg":"value is not a valid JSON object","type":"value_error.jsondecode"}]})";
const std::string sid = "0123456789abcdef0123456789abcdef";  // well-formed, held by nobody
const std::string no_session = R"({"detail":"session not found or not running"})";
const std::string outside = R"({"detail":"path must be under /workspace"})";

struct temp_dir {
  std::filesystem::path path =
      std::filesystem::temp_directory_path() /
      ("dg-front-" + std::to_string(::getpid()) + "-" + std::to_string(rand()));
  temp_dir() { std::filesystem::create_directories(path); }
  ~temp_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

}  // namespace

TEST_CASE("aivory front: a path no route has is 404, a method its route lacks 405", "[front]") {
  front f;
  for (const auto& [method, path] :
       std::vector<std::pair<std::string, std::string>>{{"POST", "/nope"},
                                                        {"POST", "/files/"},
                                                        {"POST", "/files/get/x"},
                                                        {"POST", "/storage"},
                                                        {"DELETE", "/sessions/"},
                                                        {"POST", "/sessions/a/b"}}) {
    CAPTURE(method, path);
    auto r = f.call(method, path, "{}");
    CHECK(r.status == 404);
    CHECK(r.body == R"({"detail":"Not Found"})");
  }
  for (const auto& [method, path] :
       std::vector<std::pair<std::string, std::string>>{{"GET", "/files"},
                                                        {"PUT", "/storage/put"},
                                                        {"GET", "/sessions"},
                                                        {"POST", "/sessions/" + sid},
                                                        {"GET", "/files/list"},
                                                        {"DELETE", "/storage/gc"}}) {
    CAPTURE(method, path);
    auto r = f.call(method, path, "{}");
    CHECK(r.status == 405);
    CHECK(r.body == R"({"detail":"Method Not Allowed"})");
  }
  CHECK(f.engine.calls().empty());
}

TEST_CASE("aivory front: the table says each route's body limit", "[front]") {
  config c;
  c.max_body_bytes = 1000;
  c.max_storage_body_bytes = 5000;
  CHECK(aivory::max_body(c, "/storage/put") == 5000);
  for (const char* path :
       {"/storage/delete", "/storage/gc", "/files", "/exec", "/sessions", "/healthz", "/nope"}) {
    CAPTURE(path);
    CHECK(aivory::max_body(c, path) == 1000);
  }
  // The service asks the table (the HTTP server checks Content-Length against it).
  c.allow_no_auth = true;
  service s(c, nowhere());
  CHECK(s.max_body("/storage/put") == 5000);
  CHECK(s.max_body("/files") == 1000);
}

TEST_CASE("aivory front: the files routes' bodies, field by field, in the Aivory shapes",
          "[front][files]") {
  front f;
  struct row {
    std::string path, body;
    unsigned status;
    std::string answer;
  };
  const std::string b64 = "aGk=";  // "hi"
  const std::vector<row> rows = {
      // A body that is not a JSON object, for every route.
      {"/files", "not json", 422, not_json},
      {"/files/get", "[1]", 422, not_json},
      {"/files/list", "", 422, not_json},
      {"/files/reset-inputs", "\"x\"", 422, not_json},
      // Each field required, the first missing named.
      {"/files", R"({"path":"a","data_base64":"aGk="})", 422, missing("session_id")},
      {"/files", R"({"session_id":")" + sid + R"(","data_base64":"aGk="})", 422, missing("path")},
      {"/files", R"({"session_id":")" + sid + R"(","path":"a"})", 422, missing("data_base64")},
      {"/files", R"({"session_id":null,"path":"a","data_base64":"aGk="})", 422,
       missing("session_id")},
      {"/files/get", R"({"session_id":")" + sid + R"("})", 422, missing("path")},
      {"/files/list", "{}", 422, missing("session_id")},
      {"/files/reset-inputs", R"({"path":"a"})", 422, missing("session_id")},
      // A field of the wrong type.
      {"/files", R"({"session_id":1,"path":"a","data_base64":"aGk="})", 422,
       not_a_string("session_id")},
      {"/files", R"({"session_id":")" + sid + R"(","path":["a"],"data_base64":"aGk="})", 422,
       not_a_string("path")},
      {"/files/get", R"({"session_id":")" + sid + R"(","path":true})", 422, not_a_string("path")},
      {"/files/list", R"({"session_id":{}})", 422, not_a_string("session_id")},
      // The upload's size before decoding (more base64 than 31 bytes can make is not even
      // decoded), its base64, its size after, all before the path and the session.
      {"/files",
       R"({"session_id":"x","path":"/etc/x","data_base64":")" + std::string(48, '!') + R"("})", 413,
       R"({"detail":"file too large"})"},
      {"/files", R"({"session_id":"x","path":"/etc/x","data_base64":"a!=="})", 400,
       R"({"detail":"invalid base64"})"},
      {"/files",
       R"({"session_id":"x","path":"/etc/x","data_base64":")" + std::string(44, 'A') + R"("})", 413,
       R"({"detail":"file too large"})"},
      {"/files",
       R"({"session_id":"x","path":"/etc/x","data_base64":")" + std::string(40, 'A') + R"("})", 400,
       outside},
      // The path before the session.
      {"/files", R"({"session_id":"x","path":"/etc/passwd","data_base64":"aGk="})", 400, outside},
      {"/files/get", R"({"session_id":"x","path":"../etc/passwd"})", 400, outside},
      // The session id: malformed 400, unknown 404.
      {"/files", R"({"session_id":"ABC","path":"a","data_base64":"aGk="})", 400,
       R"({"detail":"invalid session_id"})"},
      {"/files/get", R"({"session_id":"x","path":"a"})", 400, R"({"detail":"invalid session_id"})"},
      {"/files/list", R"({"session_id":""})", 400, R"({"detail":"invalid session_id"})"},
      {"/files/reset-inputs", R"({"session_id":"../x"})", 400,
       R"({"detail":"invalid session_id"})"},
      {"/files", R"({"session_id":")" + sid + R"(","path":"a","data_base64":"aGk="})", 404,
       no_session},
      {"/files/get", R"({"session_id":")" + sid + R"(","path":"a"})", 404, no_session},
      {"/files/list", R"({"session_id":")" + sid + R"("})", 404, no_session},
      {"/files/reset-inputs", R"({"session_id":")" + sid + R"("})", 404, no_session},
  };
  for (const auto& r : rows) {
    CAPTURE(r.path, r.body);
    auto got = f.post(r.path, r.body);
    CHECK(got.status == r.status);
    CHECK(got.body == r.answer);
  }
  CHECK(f.engine.calls().empty());
}

TEST_CASE("files: a path that leaves /workspace, or is /workspace, is refused before any session",
          "[files]") {
  front f;
  for (const char* path :
       {"/etc/passwd", "../etc/passwd", "/workspace/../etc", "a/../../x", "/workspace", "/", ""}) {
    CAPTURE(path);
    auto put = f.core.files.put_file({sid, path, "hi"});
    REQUIRE_FALSE(put.ok());
    CHECK(put.error() == refusal{refusal_kind::invalid, "path must be under /workspace"});
  }
  for (const char* path :
       {"/etc/passwd", "../etc/passwd", "/workspace/../etc", "a/../../x", "/", ""}) {
    CAPTURE(path);
    auto get = f.core.files.get_file({sid, path});
    REQUIRE_FALSE(get.ok());
    CHECK(get.error() == refusal{refusal_kind::invalid, "path must be under /workspace"});
  }
  // A path inside goes on to the session (unknown here).
  for (const char* path : {"a", "/workspace/a", "uploads/../a"}) {
    CAPTURE(path);
    auto put = f.core.files.put_file({sid, path, "hi"});
    REQUIRE_FALSE(put.ok());
    CHECK(put.error().kind == refusal_kind::not_found);
  }
  // More than SANDBOX_MAX_UPLOAD_BYTES is refused by the room too, whoever calls it.
  auto big = f.core.files.put_file({sid, "a", std::string(32, 'x')});
  REQUIRE_FALSE(big.ok());
  CHECK(big.error() == refusal{refusal_kind::too_large, "file too large"});
}

TEST_CASE("aivory front: the storage routes' bodies, in the Aivory sidecar's order",
          "[front][storage]") {
  temp_dir dir;
  front f;
  f.c.local_storage_dir = dir.path.string();
  const std::string local = R"("storage":{"provider":"local"})";
  struct row {
    std::string path, body;
    unsigned status;
    std::string answer;
  };
  const std::vector<row> rows = {
      {"/storage/put", "nope", 422, not_json},
      {"/storage/put", R"({"data_base64":"aGk="})", 422, missing("key")},
      {"/storage/put", R"({"key":"k"})", 422, missing("data_base64")},
      {"/storage/put", R"({"key":"k","data_base64":"aGk=","content_type":3})", 422,
       not_a_string("content_type")},
      {"/storage/put", R"({"key":"k","data_base64":"aGk=","expires_in":"soon"})", 422,
       R"({"detail":[{"loc":["body","expires_in"],"msg":"value is not a valid integer","type":"type_error.integer"}]})"},
      {"/storage/delete", "{}", 422, missing("key")},
      {"/storage/gc", "{}", 422, missing("max_age_seconds")},
      {"/storage/gc", R"({"max_age_seconds":null})", 422, missing("max_age_seconds")},
      {"/storage/gc", R"({"max_age_seconds":1.5})", 422,
       R"({"detail":[{"loc":["body","max_age_seconds"],"msg":"value is not a valid integer","type":"type_error.integer"}]})"},
      // The storage block, then its presence, then the key, then the base64.
      {"/storage/put", R"({"key":"../k","data_base64":"!","storage":{"provider":"oss"}})", 400,
       R"({"detail":"unsupported storage provider: oss"})"},
      {"/storage/put", R"({"key":"../k","data_base64":"!"})", 400,
       R"({"detail":"storage backend not configured"})"},
      {"/storage/put", R"({"key":"../k","data_base64":"!",)" + local + "}", 400,
       R"({"detail":"invalid storage key"})"},
      {"/storage/put", R"({"key":"/k","data_base64":"aGk=",)" + local + "}", 400,
       R"({"detail":"invalid storage key"})"},
      {"/storage/put", R"({"key":"k","data_base64":"!",)" + local + "}", 400,
       R"({"detail":"invalid base64"})"},
      {"/storage/delete", R"({"key":"../k","storage":{"provider":"s3"}})", 400,
       R"({"detail":"storage.s3_bucket is required"})"},
      {"/storage/delete", R"({"key":"../k"})", 400,
       R"({"detail":"storage backend not configured"})"},
      {"/storage/delete", R"({"key":"a//b",)" + local + "}", 400,
       R"({"detail":"invalid storage key"})"},
      {"/storage/gc", R"({"max_age_seconds":1,"storage":{"provider":"local","prefix":"../x"}})",
       400, R"({"detail":"invalid storage prefix"})"},
      // No storage: nothing to collect.
      {"/storage/gc", R"({"max_age_seconds":1})", 200,
       R"({"deleted":0,"scanned":0,"freed_bytes":0})"},
  };
  for (const auto& r : rows) {
    CAPTURE(r.path, r.body);
    auto got = f.post(r.path, r.body);
    CHECK(got.status == r.status);
    CHECK(got.body == r.answer);
  }
  // Nothing was written by a refused put.
  CHECK(std::filesystem::is_empty(dir.path));
}

TEST_CASE(
    "storage objects: local storage writes, then refuses the URL, delete and gc answer what they "
    "did",
    "[front][storage]") {
  temp_dir dir;
  front f;
  f.c.local_storage_dir = dir.path.string();
  auto put = f.post(
      "/storage/put",
      R"({"key":"up/a.bin","data_base64":"aGk=","storage":{"provider":"local","prefix":"t"}})");
  CHECK(put.status == 400);
  CHECK(put.body == R"({"detail":"presigned URLs are unsupported for local storage"})");
  std::ifstream written(dir.path / "t/up/a.bin");
  CHECK(std::string(std::istreambuf_iterator<char>(written), {}) == "hi");

  // Collected: archives under workspaces/ and anything under mineru/, older than the cutoff.
  for (const char* rel : {"t/workspaces/old.tgz", "t/workspaces/new.tgz", "t/workspaces/old.txt",
                          "t/mineru/old", "t/other/old.tgz"}) {
    std::filesystem::create_directories((dir.path / rel).parent_path());
    std::ofstream(dir.path / rel) << "1234";
    if (std::string(rel).find("old") != std::string::npos) {
      const struct timeval times[2] = {{1000, 0}, {1000, 0}};
      REQUIRE(::utimes((dir.path / rel).c_str(), times) == 0);
    }
  }
  auto gc = f.post("/storage/gc",
                   R"({"max_age_seconds":3600,"storage":{"provider":"local","prefix":"t"}})");
  CHECK(gc.status == 200);
  CHECK(gc.body == R"({"deleted":2,"scanned":3,"freed_bytes":8})");
  CHECK_FALSE(std::filesystem::exists(dir.path / "t/workspaces/old.tgz"));
  CHECK_FALSE(std::filesystem::exists(dir.path / "t/mineru/old"));
  CHECK(std::filesystem::exists(dir.path / "t/workspaces/new.tgz"));
  CHECK(std::filesystem::exists(dir.path / "t/workspaces/old.txt"));
  CHECK(std::filesystem::exists(dir.path / "t/other/old.tgz"));
  // max_age_seconds ≤ 0 collects nothing.
  CHECK(
      f.post("/storage/gc", R"({"max_age_seconds":0,"storage":{"provider":"local","prefix":"t"}})")
          .body == R"({"deleted":0,"scanned":0,"freed_bytes":0})");

  // A key given whole (under the prefix) or bare names the same object.
  auto del = f.post("/storage/delete",
                    R"({"key":"t/up/a.bin","storage":{"provider":"local","prefix":"t"}})");
  CHECK(del.status == 200);
  CHECK(del.body == R"({"ok":true,"key":"t/up/a.bin"})");
  CHECK_FALSE(std::filesystem::exists(dir.path / "t/up/a.bin"));
  del = f.post("/storage/delete",
               R"({"key":"up/b.bin","storage":{"provider":"local","prefix":"t"}})");
  CHECK(del.body == R"({"ok":true,"key":"t/up/b.bin"})");
}

TEST_CASE("storage objects: a key that would leave the prefix is refused whoever calls",
          "[storage]") {
  temp_dir dir;
  config c;
  c.local_storage_dir = dir.path.string();
  auto spec = choose_storage(R"({"provider":"local","prefix":"t"})", c).spec;
  REQUIRE(spec);
  for (const char* key : {"../escape", "/abs", "a/../../b", "", "a\\b"}) {
    CAPTURE(key);
    auto put = put_object({*spec, key, "x", "", std::nullopt}, c);
    REQUIRE_FALSE(put.ok());
    CHECK(put.error() == refusal{refusal_kind::invalid, "invalid storage key"});
    auto del = remove_object({*spec, key}, c);
    REQUIRE_FALSE(del.ok());
    CHECK(del.error() == refusal{refusal_kind::invalid, "invalid storage key"});
  }
  CHECK(std::filesystem::is_empty(dir.path));
}

TEST_CASE(
    "storage objects: the sidecar's own area (dormant records and archives) is no client's, by "
    "prefix or by key",
    "[storage][dormant]") {
  temp_dir dir;
  config c;
  c.local_storage_dir = dir.path.string();
  std::filesystem::create_directories(dir.path / "dockgate-dormant/records");
  std::ofstream(dir.path / "dockgate-dormant/records/s.json") << R"({"env":["KEY=secret"]})";
  for (const char* prefix :
       {"dockgate-dormant", "/dockgate-dormant/records/", "dockgate-dormant/x"})
    CHECK(choose_storage(std::string(R"({"provider":"local","prefix":")") + prefix + R"("})", c)
              .error.value_or("")
              .find("is the sidecar's own") != std::string::npos);
  auto root = choose_storage(R"({"provider":"local","prefix":"/"})", c).spec;
  REQUIRE(root);
  auto put = put_object({*root, "dockgate-dormant/records/s.json", "x", "", std::nullopt}, c);
  REQUIRE_FALSE(put.ok());
  CHECK(put.error().message == "invalid storage key: the sidecar's own area");
  REQUIRE_FALSE(remove_object({*root, "dockgate-dormant/records/s.json"}, c).ok());
  CHECK(std::filesystem::exists(dir.path / "dockgate-dormant/records/s.json"));
  // A name that only begins the same is a client's.
  CHECK(put_object({*root, "dockgate-dormantly/x", "x", "", std::nullopt}, c).error().message !=
        "invalid storage key: the sidecar's own area");
}

TEST_CASE(
    "aivory service: the client's key, or a member's credential on a forwarded call, else 401",
    "[front]") {
  config c;
  c.api_key = "secret-key";
  service s(c, nowhere());
  auto call = [&](const std::string& authorization, const std::string& forwarded = {},
                  const std::string& fleet = {}) {
    http_request r;
    r.method = "POST";
    r.path = "/nope";
    r.body = "{}";
    r.authorization = authorization;
    r.forwarded = forwarded;
    r.fleet_auth = fleet;
    return s.handle(r);
  };
  for (const char* wrong : {"", "secret-key", "Bearer secret-ke", "Bearer secret-key ",
                            "bearer secret-key", "Bearer x"}) {
    CAPTURE(wrong);
    auto r = call(wrong);
    CHECK(r.status == 401);
    CHECK(r.body == R"({"error":"unauthorized"})");
  }
  // The right key reaches the table (which has no such route).
  CHECK(call("Bearer secret-key").body == R"({"detail":"Not Found"})");
  // A forwarded call needs the fleet's credential; the client's key does not stand in.
  auto fwd = call("Bearer secret-key", "other");
  CHECK(fwd.status == 401);
  CHECK(
      fwd.body ==
      R"x({"error":"unauthorized","detail":"forwarded call refused: this sidecar accepts no forwarded call (no SANDBOX_FLEET_KEY_FILE)"})x");
  fwd = call("", {}, "forged");
  CHECK(fwd.status == 401);
  // Nor does SANDBOX_ALLOW_NO_AUTH.
  c.allow_no_auth = true;
  c.fleet_key = std::string(32, 'k');
  service open(c, nowhere());
  http_request r;
  r.method = "POST";
  r.path = "/nope";
  r.forwarded = "other";
  auto refused = open.handle(r);
  CHECK(refused.status == 401);
  CHECK(
      refused.body ==
      R"x({"error":"unauthorized","detail":"forwarded call refused: a forwarded call needs the fleet's credential (X-Dockgate-Fleet)"})x");
  r.forwarded.clear();
  CHECK(open.handle(r).body == R"({"detail":"Not Found"})");
  // GET /healthz only.
  r.path = "/healthz";
  auto health = open.handle(r);
  CHECK(health.status == 405);
  CHECK(health.body == R"({"detail":"Method Not Allowed"})");
}
