// "system_info": {"keep": [...]}: `/info` passes only the members a profile names.
#include "dockgate/policy/system_info.hpp"

#include <catch2/catch.hpp>

#include "dockgate/policy/policy_file.hpp"

using namespace dockgate::policy;

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
