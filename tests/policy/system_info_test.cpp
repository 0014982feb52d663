// "system_info": {"keep": [...]}: `/info` passes only the members a profile names.
#include "dockgate/policy/system_info.hpp"

#include <catch2/catch.hpp>

#include "dockgate/policy/policy_file.hpp"
#include "dockgate/policy/route.hpp"

using namespace dockgate::policy;
namespace http = dockgate::http;

TEST_CASE("system_info: only the kept members of /info go back, in the daemon's order") {
  const std::string info =
      R"({"ID":"x","Containers":7,"Name":"build-host-3","OSType":"linux","Architecture":"x86_64",)"
      R"("RegistryConfig":{"Mirrors":["https://m"]},"Runtimes":{"runc":{"path":"runc"}},"Labels":["a"]})";
  CHECK(filter_system_info(info, {"Architecture", "OSType", "Runtimes"}) ==
        R"({"OSType":"linux","Architecture":"x86_64","Runtimes":{"runc":{"path":"runc"}}})"
        "\n");
  CHECK(filter_system_info(info, {}) == "{}\n");
  // Not an object (an error page, a list): nothing of it is known safe.
  CHECK(filter_system_info("[1,2]", {"OSType"}) == "{}\n");
  CHECK(filter_system_info("not json", {"OSType"}) == "{}\n");
}

TEST_CASE("system_info: a profile's keep list is loaded strictly") {
  auto ok = parse_policy(R"({"profiles":{"p":{"allow":["SystemInfo"],
      "system_info":{"keep":["OSType","Architecture"]}}}})");
  REQUIRE(ok.value);
  REQUIRE(ok.value->profiles[0].system_info_keep);
  CHECK(ok.value->profiles[0].system_info_keep->size() == 2);
  auto none = parse_policy(R"({"profiles":{"p":{"allow":["SystemInfo"]}}})");
  REQUIRE(none.value);
  CHECK_FALSE(none.value->profiles[0].system_info_keep);
  auto bad =
      parse_policy(R"({"profiles":{"p":{"allow":[],"system_info":{"keep":[1],"drop":[]}}}})");
  REQUIRE_FALSE(bad.value);
  CHECK(bad.errors.size() == 3);  // keep not strings, "drop" unknown, so no keep list
  auto empty = parse_policy(R"({"profiles":{"p":{"allow":[],"system_info":{}}}})");
  REQUIRE_FALSE(empty.value);
}

TEST_CASE(
    "system_info: every spelling of /info is the one filtered operation, odd bodies give nothing",
    "[redteam]") {
  // The proxy filters by operation: each way to ask for /info must route to SystemInfo
  // (or be refused), never to something answered whole.
  for (const char* target : {"/info", "/v1.24/info", "/v1.41/info?x", "/v1.41/info?x=1&y="}) {
    CAPTURE(target);
    auto r = route_request(http::method::get, target);
    REQUIRE(std::holds_alternative<route>(r));
    CHECK(std::get<route>(r).op == operation::SystemInfo);
  }
  for (const char* target : {"/info/", "//info", "/v1.41/./info", "/INFO", "/v1.41/info%20"}) {
    CAPTURE(target);
    auto r = route_request(http::method::get, target);
    CHECK(
        (std::holds_alternative<route_error>(r) || std::get<route>(r).op == operation::SystemInfo));
  }
  auto head = route_request(http::method::head, "/v1.41/info");
  CHECK((std::holds_alternative<route_error>(head) ||
         std::get<route>(head).op == operation::SystemInfo));
  // A compressed, truncated or doubled body is not read as the daemon's object.
  const std::string gzip("\x1f\x8b\x08\x00\x00\x00\x00\x00", 8);
  CHECK(filter_system_info(gzip, {"OSType"}) == "{}\n");
  CHECK(filter_system_info(R"({"OSType":"linux","Name":"h)", {"OSType"}) == "{}\n");
  CHECK(filter_system_info(R"({"OSType":"linux"} {"Name":"h"})", {"OSType", "Name"}) == "{}\n");
  // An escaped key is the daemon's member of that name; no other member rides along.
  CHECK(filter_system_info(R"({"\u004fSType":"linux","Name":"h"})", {"OSType"}) ==
        "{\"OSType\":\"linux\"}\n");
}
