#include <catch2/catch.hpp>

#include "dockgate/policy/decision.hpp"
#include "dockgate/policy/policy_file.hpp"

using namespace dockgate::policy;

TEST_CASE("a valid policy loads", "[policy_file]") {
  auto r = parse_policy(R"({
    "default_profile": "cli",
    "profiles": {
      "cli": {"description": "people", "allow": ["SystemPing", "ContainerCreate"], "images": {"allow": ["*"]}},
      "ro": {"allow": []}
    }})");
  REQUIRE(r.errors.empty());
  REQUIRE(r.value);
  CHECK(r.value->default_().name == "cli");
  CHECK(r.value->default_().allows(operation::SystemPing));
  CHECK_FALSE(r.value->default_().allows(operation::SystemInfo));
  REQUIRE(r.value->find("ro"));
  CHECK(r.value->find("ro")->allowed.none());
  CHECK_FALSE(r.value->find("nope"));
}

TEST_CASE("every error in a policy is reported at once", "[policy_file]") {
  auto r = parse_policy(R"({
    "default_profile": "missing",
    "extra": 1,
    "profiles": {
      "a": {"allow": ["SystemPing", "NoSuchOp", 7, "SystemPing"], "colour": "red"},
      "b": {"description": 3},
      "a": {"allow": []}
    }})");
  CHECK_FALSE(r.value);
  const std::vector<std::string> expected = {
      "policy: unknown key \"extra\"",
      "profiles.a.allow[1]: unknown operation \"NoSuchOp\" (use Engine API operationId names)",
      "profiles.a.allow[2]: must be a string",
      "profiles.a.allow[3]: operation \"SystemPing\" listed twice",
      "profiles.a: unknown key \"colour\"",
      "profiles.b.description: must be a string",
      "profiles.b: missing \"allow\" (an empty list allows nothing)",
      "profiles: duplicate key \"a\"",
      "default_profile: no profile named \"missing\"",
  };
  CHECK(r.errors == expected);
}

TEST_CASE("malformed policy documents are refused", "[policy_file]") {
  for (auto doc : {"", "[]", "{", R"({"profiles": []})", R"({"profiles": {}})",
                   R"({"profiles": {"a": {"allow": "SystemPing"}}})",
                   R"({"profiles": {"a": {"allow": []}, "b": {"allow": []}}})"}) {
    CAPTURE(doc);
    auto r = parse_policy(doc);
    CHECK_FALSE(r.value);
    CHECK_FALSE(r.errors.empty());
  }
}

TEST_CASE("decide denies by default with Docker's message", "[decision]") {
  auto pol = parse_policy(R"({"profiles": {"ro": {"allow": ["SystemPing"]}}})");
  REQUIRE(pol.value);
  const auto& p = pol.value->default_();
  auto ping = std::get<route>(route_request(http_method::get, "/v1.41/_ping"));
  CHECK(decide(p, ping) == decision{allow{}});
  auto create = std::get<route>(route_request(http_method::post, "/v1.41/containers/create"));
  CHECK(decide(p, create) ==
        decision{deny{403, "operation", "dockgate: ContainerCreate is not allowed by profile ro"}});
}
