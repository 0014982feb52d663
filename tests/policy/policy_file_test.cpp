#include "dockgate/policy/policy_file.hpp"

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <set>

#include "dockgate/policy/decision.hpp"
#include "dockgate/policy/route.hpp"
#include "dockgate/policy/tecnativa.hpp"

using namespace dockgate::policy;
namespace http = dockgate::http;

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
  auto ping = std::get<route>(route_request(http::method::get, "/v1.41/_ping"));
  CHECK(decide(p, ping) == decision{allow{}});
  auto create = std::get<route>(route_request(http::method::post, "/v1.41/containers/create"));
  CHECK(decide(p, create) ==
        decision{deny{403, "operation", "dockgate: ContainerCreate is not allowed by profile ro"}});
}

TEST_CASE("clients select their profile, first match wins, no match without default is refused",
          "[policy_file][clients]") {
  auto r = parse_policy(R"({
    "clients": [
      {"uid": 1000, "profile": "ro"},
      {"gid": 998, "profile": "cli"},
      {"address": "10.1.0.0/16", "profile": "ro"},
      {"address": "::1", "profile": "cli"},
      {"tls_subject": "CN=ci,O=example", "profile": "cli"}
    ],
    "profiles": {"cli": {"allow": ["SystemPing"]}, "ro": {"allow": ["SystemInfo"], "mode": "audit"}}})");
  INFO(Catch::Detail::stringify(r.errors));
  REQUIRE(r.value);
  const auto& pol = *r.value;
  auto name = [&](client_identity id) {
    const profile* p = pol.select(id);
    return p ? p->name : std::string("(refused)");
  };
  CHECK(name({1000, 998, "", ""}) == "ro");
  CHECK(name({1001, 998, "", ""}) == "cli");
  CHECK(name({1001, 5, "", ""}) == "(refused)");
  CHECK(name({std::nullopt, std::nullopt, "10.1.2.3", ""}) == "ro");
  CHECK(name({std::nullopt, std::nullopt, "10.2.0.1", ""}) == "(refused)");
  CHECK(name({std::nullopt, std::nullopt, "::1", ""}) == "cli");
  CHECK(name({std::nullopt, std::nullopt, "127.0.0.1", ""}) == "(refused)");
  CHECK(name({std::nullopt, std::nullopt, "", "CN=ci,O=example"}) == "cli");
  CHECK(pol.find("ro")->mode == profile::mode_kind::audit);
  CHECK(pol.find("cli")->mode == profile::mode_kind::enforce);
}

TEST_CASE("addresses match CIDR blocks exactly", "[policy_file][clients]") {
  CHECK(address_matches("127.0.0.1", "127.0.0.1"));
  CHECK(address_matches("127.0.0.0/8", "127.255.0.1"));
  CHECK_FALSE(address_matches("127.0.0.0/8", "128.0.0.1"));
  CHECK(address_matches("0.0.0.0/0", "8.8.8.8"));
  CHECK(address_matches("fd00::/8", "fd12::1"));
  CHECK_FALSE(address_matches("fd00::/8", "fe80::1"));
  CHECK_FALSE(address_matches("10.0.0.0/8", "::ffff:10.0.0.1"));  // families are not mixed
  CHECK_FALSE(address_matches("10.0.0.0/33", "10.0.0.1"));
  CHECK_FALSE(address_matches("10.0.0.0/x", "10.0.0.1"));
  CHECK_FALSE(address_matches("not-an-ip", "10.0.0.1"));
}

TEST_CASE("client rules are validated", "[policy_file][clients]") {
  auto r = parse_policy(
      R"({"clients": [{"profile": "p"}, {"uid": -1, "profile": "p"}, {"address": "10.0.0.0/99", "profile": "p"},
    {"uid": 1, "profile": "nope"}, {"uid": 1, "colour": "red", "profile": "p"}],
    "profiles": {"p": {"allow": [], "mode": "loud"}}})");
  CHECK_FALSE(r.value);
  CHECK(r.errors.size() == 6);
}

TEST_CASE("Tecnativa's variables map to operations as its haproxy.cfg does",
          "[policy][tecnativa]") {
  auto allowed = [](const std::map<std::string, std::string>& env, operation op) {
    auto r = tecnativa_policy(env);
    REQUIRE(r.value);
    return r.value->default_().allows(op);
  };
  // Defaults: EVENTS, PING, VERSION.
  CHECK(allowed({}, operation::SystemPing));
  CHECK(allowed({}, operation::SystemEvents));
  CHECK(allowed({}, operation::SystemVersion));
  CHECK_FALSE(allowed({}, operation::SystemInfo));
  CHECK_FALSE(allowed({}, operation::ContainerList));
  // A prefix opens its reads; POST=0 keeps everything else shut.
  CHECK(allowed({{"CONTAINERS", "1"}}, operation::ContainerList));
  CHECK(allowed({{"CONTAINERS", "1"}}, operation::ContainerLogs));
  CHECK_FALSE(allowed({{"CONTAINERS", "1"}}, operation::ContainerCreate));
  CHECK_FALSE(allowed({{"CONTAINERS", "1"}}, operation::ContainerDelete));
  CHECK(allowed({{"CONTAINERS", "1"}, {"POST", "1"}}, operation::ContainerCreate));
  CHECK(allowed({{"CONTAINERS", "1"}, {"POST", "1"}},
                operation::ContainerExec));  // /containers/{id}/exec
  CHECK_FALSE(allowed({{"CONTAINERS", "1"}, {"POST", "1"}},
                      operation::ExecStart));  // /exec/{id}/start: EXEC
  CHECK(allowed({{"EXEC", "1"}, {"POST", "1"}}, operation::ExecStart));
  CHECK(allowed({{"IMAGES", "1"}, {"POST", "1"}}, operation::ImageCreate));
  CHECK(allowed({{"NETWORKS", "1"}}, operation::NetworkList));
  CHECK(allowed({{"SYSTEM", "1"}}, operation::SystemDataUsage));
  CHECK(allowed({{"INFO", "1"}}, operation::SystemInfo));
  CHECK_FALSE(allowed({{"EVENTS", "0"}}, operation::SystemEvents));
  // ALLOW_START/STOP/RESTARTS: those actions without CONTAINERS, and only with POST=1
  // (haproxy denies a POST before it reads them).
  CHECK(allowed({{"POST", "1"}, {"ALLOW_START", "1"}}, operation::ContainerStart));
  CHECK_FALSE(allowed({{"POST", "1"}, {"ALLOW_START", "1"}}, operation::ContainerStop));
  CHECK(allowed({{"POST", "1"}, {"ALLOW_RESTARTS", "1"}}, operation::ContainerKill));
  CHECK(allowed({{"POST", "1"}, {"ALLOW_RESTARTS", "1"}}, operation::ContainerRestart));
  CHECK_FALSE(allowed({{"ALLOW_START", "1"}}, operation::ContainerStart));
  CHECK(tecnativa_policy({{"POST", "maybe"}}).errors ==
        std::vector<std::string>{"POST=maybe: use 1 or 0"});
  // No owners in Tecnativa's world: nothing is confined; the body checks still apply.
  CHECK_FALSE(tecnativa_policy({}).value->default_().rules.confine_to_owned);
}

TEST_CASE("the read-only and dashboard profiles allow no operation that changes anything",
          "[policy][profiles]") {
  for (const char* file : {"compose/policies/read-only.json", "compose/policies/dashboard.json"}) {
    CAPTURE(file);
    std::ifstream in(std::string(DOCKGATE_SOURCE_DIR) + "/" + file);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto r = parse_policy(text);
    REQUIRE(r.value);
    const auto& p = r.value->default_();
    for (const auto& route : route_templates()) {
      if (!p.allows(route.op)) continue;
      CAPTURE(operation_name(route.op));
      CHECK((route.method == http::method::get || route.method == http::method::head));
    }
    // Nothing that reaches into a container.
    for (auto op : {operation::ContainerExec, operation::ExecStart, operation::ContainerAttach,
                    operation::ContainerArchive, operation::ContainerExport})
      CHECK_FALSE(p.allows(op));
  }
}

TEST_CASE("the aivory profile allows exactly the Aivory sidecar's docker CLI calls",
          "[policy][profiles]") {
  // docs/aivory-api.md, "Docker calls", plus the wait `docker run -d` opens.
  std::ifstream in(std::string(DOCKGATE_SOURCE_DIR) + "/compose/policies/aivory.json");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto r = parse_policy(text);
  REQUIRE(r.value);
  const auto& p = r.value->default_();
  const std::set<operation> expected = {
      operation::SystemPing,       operation::SystemPingHead,  operation::SystemVersion,
      operation::ImageInspect,     operation::ImageCreate,     operation::ContainerList,
      operation::ContainerCreate,  operation::ContainerStart,  operation::ContainerWait,
      operation::ContainerInspect, operation::ContainerDelete, operation::ContainerExec,
      operation::ExecStart,        operation::ExecInspect};
  std::set<operation> allowed;
  for (const auto& route : route_templates())
    if (p.allows(route.op)) allowed.insert(route.op);
  CHECK(allowed == expected);
  CHECK(p.rules.confine_to_owned);
}

TEST_CASE("the complete policy example in docs/policy.md loads", "[policy][docs]") {
  std::ifstream in(std::string(DOCKGATE_SOURCE_DIR) + "/docs/policy.md");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // Every ```json block that is a whole file (not an excerpt with "...").
  int loaded = 0;
  for (std::size_t at = text.find("```json\n"); at != std::string::npos;
       at = text.find("```json\n", at + 1)) {
    const auto start = at + 8;
    const auto end = text.find("```", start);
    const std::string block = text.substr(start, end - start);
    if (block.find("\"...\"") != std::string::npos) continue;
    auto r = parse_policy(block);
    INFO(Catch::Detail::stringify(r.errors));
    CHECK(r.value);
    ++loaded;
  }
  CHECK(loaded >= 1);
}

TEST_CASE("every policy the project ships loads", "[policy][policy_file]") {
  // compose/policies/*.json: what the images, the Debian package and the docs name.
  int loaded = 0;
  for (const auto& e : std::filesystem::directory_iterator(std::string(DOCKGATE_SOURCE_DIR) +
                                                           "/compose/policies")) {
    if (e.path().extension() != ".json") continue;
    std::ifstream in(e.path());
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto r = parse_policy(text);
    INFO(e.path().filename().string() << ": " << Catch::Detail::stringify(r.errors));
    CHECK(r.value);
    ++loaded;
  }
  CHECK(loaded >= 8);
}

TEST_CASE("the runner and dev container profiles allow exactly their clients' operations",
          "[policy][profiles]") {
  using o = operation;
  const std::set<operation> common = {
      o::SystemPing,     o::SystemPingHead,  o::SystemVersion,   o::ImageInspect,
      o::ImageCreate,    o::ContainerList,   o::ContainerCreate, o::ContainerInspect,
      o::ContainerStart, o::ContainerAttach, o::ContainerWait,   o::ContainerLogs,
      o::ContainerStop,  o::ContainerKill,   o::ContainerDelete, o::ContainerExec,
      o::ExecStart,      o::ExecInspect,     o::ExecResize};
  auto with = [&](std::initializer_list<operation> more) {
    auto s = common;
    s.insert(more);
    return s;
  };
  const std::pair<const char*, std::set<operation>> expected[] = {
      {"gitlab-runner", with({o::SystemInfo, o::NetworkList, o::NetworkInspect, o::NetworkCreate,
                              o::NetworkConnect, o::NetworkDisconnect, o::NetworkDelete,
                              o::VolumeList, o::VolumeInspect, o::VolumeCreate, o::VolumeDelete})},
      {"github-runner", with({o::SystemAuth, o::NetworkList, o::NetworkInspect, o::NetworkCreate,
                              o::NetworkDelete, o::NetworkPrune})},
      {"devcontainer", with({o::SystemInfo, o::SystemEvents, o::ContainerResize})},
  };
  for (const auto& [name, ops] : expected) {
    CAPTURE(name);
    std::ifstream in(std::string(DOCKGATE_SOURCE_DIR) + "/compose/policies/" + name + ".json");
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto r = parse_policy(text);
    REQUIRE(r.value);
    const auto& p = r.value->default_();
    std::set<operation> allowed;
    for (const auto& route : route_templates())
      if (p.allows(route.op)) allowed.insert(route.op);
    CHECK(allowed == ops);
    CHECK(p.rules.confine_to_owned);
    // Nothing that builds, loads or imports an image, or reaches past its own objects.
    for (auto op : {o::ImageBuild, o::ImageLoad, o::ImageDelete, o::ContainerExport,
                    o::PutContainerArchive, o::ContainerUpdate})
      CHECK_FALSE(p.allows(op));
  }
}
