#include "dockgate/policy/go_json.hpp"

#include <catch2/catch.hpp>

using namespace dockgate::policy;

TEST_CASE("keys resolve to fields as Go's encoding/json does", "[go_json]") {
  struct key_case {
    std::string_view key;
    std::string_view field;  // empty: no field
  };
  const key_case cases[] = {
      {"Privileged", "Privileged"},
      {"privileged", "Privileged"},
      {"PRIVILEGED", "Privileged"},
      {"pRiViLeGeD", "Privileged"},
      {"Links", "Links"},
      {"Lin\xE2\x84\xAAs", "Links"},  // U+212A KELVIN SIGN folds to k
      {"\xC5\xBF"
       "ecurityOpt",
       "SecurityOpt"},  // U+017F LONG S folds to s
      {"\xC5\xBF"
       "y\xC5\xBF"
       "ctl\xC5\xBF",
       "Sysctls"},
      {"CAPADD", "CapAdd"},
      {"cpushares", "CpuShares"},
      {"Privileged ", ""},
      {" Privileged", ""},
      {"Privileg\xC3\xA9"
       "d",
       ""},  // other non-ASCII never matches
      {"Privi\xC4\xB1"
       "eged",
       ""},  // dotless i does not fold to l (nor i)
      {std::string_view("Capadd\0", 7), ""},
      {"", ""},
      {"NoSuchField", ""},
  };
  for (const auto& c : cases) {
    CAPTURE(c.key);
    auto index = resolve_key(c.key, schema::host_config);
    if (c.field.empty()) {
      CHECK_FALSE(index);
    } else {
      REQUIRE(index);
      CHECK(schema::host_config.fields[*index].name == c.field);
    }
  }
}

TEST_CASE("field names are unique under folding in every body struct", "[go_json]") {
  for (const object_spec* spec : {&schema::container_create, &schema::host_config,
                                  &schema::exec_config, &schema::container_update}) {
    for (std::size_t i = 0; i < spec->fields.size(); ++i) {
      CAPTURE(spec->name, spec->fields[i].name);
      CHECK(resolve_key(spec->fields[i].name, *spec) == i);
    }
  }
}

TEST_CASE("bodies with two readings are refused", "[go_json]") {
  struct bad {
    std::string_view body;
    std::string_view error_part;
  };
  const bad cases[] = {
      {R"({"Privileged":false,"Privileged":true})", "given twice"},
      {R"({"Privileged":false,"privileged":true})", "given twice"},
      {R"({"Privileged":false,"\u0050rivileged":true})", "given twice"},
      {R"({"Privileged":false,"PRIVILEGED":true})", "given twice"},
      {R"({"HostConfig":{"Privileged":false},"HostConfig":{"Privileged":true}})", "given twice"},
      {R"({"HostConfig":{"Binds":[],"binds":["/:/host"]}})", "given twice"},
      {R"({"Labels":{"a":"1","a":"2"}})", "duplicate key"},
      {R"({"HostConfig":{"Tmpfs":{"/tmp":"","/tmp":"exec"}}})", "duplicate key"},
      {R"({"Privileged":null})", "null is not allowed"},
      {R"({"HostConfig":{"Privileged":null}})", "null is not allowed"},
      {R"({"HostConfig":{"LogConfig":null}})", "null is not allowed"},
      {R"({"Image":"x"} {"Privileged":true})", "not one valid JSON value"},
      {R"({"Image":"x"}x)", "not one valid JSON value"},
      {R"({"Image":"x")", "not one valid JSON value"},
      {R"([])", "must be an object"},
      {R"("x")", "must be an object"},
      {R"({"HostConfig":{"Privileged":"true"}})", "must be true or false"},
      {R"({"HostConfig":{"Privileged":1}})", "must be true or false"},
      {R"({"HostConfig":{"Memory":"1g"}})", "must be an integer"},
      {R"({"HostConfig":{"Memory":1.5}})", "must be an integer"},
      {R"({"HostConfig":{"Memory":1e9}})", "must be an integer"},
      {R"({"HostConfig":{"Memory":18446744073709551615}})", "out of range"},
      {R"({"HostConfig":{"BlkioWeight":70000}})", "out of range"},
      {R"({"HostConfig":{"BlkioWeight":-1}})", "negative"},
      {R"({"HostConfig":{"Binds":"/:/host"}})", "array of strings"},
      {R"({"HostConfig":{"Binds":[1]}})", "array of strings"},
      {R"({"HostConfig":{"ConsoleSize":[1,2,3]}})", "exactly two"},
      {R"({"ExposedPorts":{"80/tcp":{"x":1}}})", "must be {}"},
      {R"({"Env":{"A":"1"}})", "array of strings"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.body);
    auto r = decode_body(c.body, schema::container_create);
    CHECK_FALSE(r.value);
    CHECK_THAT(r.error, Catch::Contains(std::string(c.error_part)));
  }
}

TEST_CASE("keys that name no field are left out, as Go ignores them, and reported", "[go_json]") {
  auto r = decode_body(
      R"({"Image":"busybox","Bogus":{"deep":[1]},"HostConfig":{"Bogus":1,"Mounts":[{"Type":"bind","Extra":2}]}})",
      schema::container_create);
  REQUIRE(r.value);
  CHECK(to_json(*r.value) == R"({"Image":"busybox","HostConfig":{"Mounts":[{"Type":"bind"}]}})");
  CHECK(r.dropped ==
        std::vector<std::string>{"Bogus", "HostConfig.Bogus", "HostConfig.Mounts[0].Extra"});
  // A policy file's values are the operator's words: there an unknown key is an error.
  auto strict = decode_body(R"({"Bogus":1})", schema::container_create, unknown_keys::refuse);
  CHECK_FALSE(strict.value);
  CHECK_THAT(strict.error, Catch::Contains("unknown field"));
  // Two spellings of one field stay refused: that is two readings, not an unknown key.
  CHECK_FALSE(
      decode_body(R"({"Privileged":false,"privileged":true,"Bogus":1})", schema::container_create)
          .value);
}

TEST_CASE("accepted bodies decode to canonical names and shapes", "[go_json]") {
  auto r = decode_body(
      R"({"image":"busybox","CMD":"echo hi","hostconfig":{"capadd":"ALL","Binds":null,"MEMORY":5},)"
      R"("Labels":{"b":"2","a":"1"},"ExposedPorts":{"80/tcp":null}})",
      schema::container_create);
  INFO(r.error);
  REQUIRE(r.value);
  CHECK(
      to_json(*r.value) ==
      R"({"ExposedPorts":{"80/tcp":{}},"Cmd":["echo hi"],"Image":"busybox","Labels":{"a":"1","b":"2"},)"
      R"("HostConfig":{"CapAdd":["ALL"],"Memory":5}})");
}
