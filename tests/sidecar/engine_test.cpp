// The fake engine the session core's unit tests run against answers as the Engine API
// does for what the core reads; and the route table of a front.
#include <catch2/catch.hpp>

#include "fake_engine.hpp"
#include "front/route_table.hpp"

using namespace dockgate::sidecar;
using namespace std::chrono_literals;

TEST_CASE("fake engine: a container's life as the Engine API answers it", "[engine]") {
  testing::fake_engine e;
  auto made = e.create("sbx-1", R"({"Image":"x","Labels":{"sandbox.session_id":"abc"}})", 1s);
  REQUIRE(made.status == 201);
  CHECK(e.create("sbx-1", "{}", 1s).status == 409);
  CHECK(e.list("sandbox.session_id", false, 1s).body == "[]");
  CHECK(e.start("sbx-1", 1s).status == 204);
  CHECK(e.inspect("sbx-1", 1s).body.find(R"("Running":true)") != std::string::npos);
  CHECK(e.list("sandbox.session_id", false, 1s).body.find(R"("sandbox.session_id":"abc")") !=
        std::string::npos);
  CHECK(e.pause("sbx-1", 1s).status == 204);
  CHECK(e.unpause("sbx-1", 1s).status == 204);
  e.fail("remove", 500);
  CHECK(e.remove("sbx-1", 1s).status == 500);
  CHECK(e.remove("sbx-1", 1s).status == 204);
  CHECK(e.inspect("sbx-1", 1s).status == 404);
  CHECK(e.count("remove") == 2);
}

TEST_CASE("route table: method and pattern, 404 and 405 apart", "[front]") {
  route_table<int> t({{"POST", "/sessions", 1},
                      {"DELETE", "/sessions/{id}", 2},
                      {"POST", "/sessions/{id}/restart", 3}});
  auto f = t.find("POST", "/sessions");
  REQUIRE(f.handler);
  CHECK(*f.handler == 1);
  f = t.find("DELETE", "/sessions/abc");
  REQUIRE(f.handler);
  CHECK(*f.handler == 2);
  CHECK(f.id == "abc");
  f = t.find("POST", "/sessions/abc/restart");
  REQUIRE(f.handler);
  CHECK(*f.handler == 3);
  CHECK(f.id == "abc");
  f = t.find("GET", "/sessions");
  CHECK_FALSE(f.handler);
  CHECK(f.method_missed);
  for (const char* path :
       {"/sessions/", "/sessions/a/b", "/sessions//restart", "/session", "/sessionsx"}) {
    CAPTURE(path);
    f = t.find("DELETE", path);
    CHECK_FALSE(f.handler);
    CHECK_FALSE(f.method_missed);
  }
}
