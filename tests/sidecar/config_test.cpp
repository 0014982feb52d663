// The sidecar's configuration (sidecar/src/config.cpp): the table of variables, each kind's
// parse and clamp, every error reported at once, the rules that join variables, and
// docs/sidecar.md's table of variables against the code's.

#include "dockgate/sidecar/config.hpp"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

using namespace dockgate::sidecar;

namespace {

using environment = std::map<std::string, std::string>;

// A configuration that loads: the one variable without a default that stops a start.
environment keyed(environment env = {}) {
  env.emplace("SANDBOX_API_KEY", "k");
  // allowlist's sessions' lists need a directory (egress_policy.hpp): one that is there.
  if (env.contains("SANDBOX_NETWORK"))
    env.emplace("SANDBOX_EGRESS_POLICY_DIR", std::filesystem::temp_directory_path().string());
  return env;
}

config loaded(const environment& env) {
  auto r = load_config(env);
  INFO((r.errors.empty() ? std::string() : r.errors.front()));
  REQUIRE(r.value);
  return *r.value;
}

std::vector<std::string> errors_of(const environment& env) {
  auto r = load_config(env);
  CHECK_FALSE(r.value);  // an error never comes with a configuration
  return r.errors;
}

// A fleet key file of `bytes` bytes, removed with the object.
struct key_file {
  std::string path;
  explicit key_file(std::size_t bytes)
      : path("/tmp/dockgate-config-test-" + std::to_string(::getpid()) + "-" +
             std::to_string(bytes) + ".key") {
    std::ofstream(path) << std::string(bytes, 'k') << "\n";
  }
  ~key_file() { std::remove(path.c_str()); }
};

environment fuse_env() {
  return keyed({{"SANDBOX_WORKSPACE_MODE", "fuse"},
                {"AIMEM_BUCKET", "b"},
                {"AIMEM_ENDPOINT", "http://127.0.0.1:9000"}});
}

std::vector<config_variable> integer_variables() {
  std::vector<config_variable> out;
  for (auto& v : config_variables())
    if (v.accepts.starts_with("integer ")) out.push_back(v);
  return out;
}

}  // namespace

TEST_CASE("config: the defaults are config's own, and unset variables keep them", "[config]") {
  config expected;
  expected.api_key = "k";
  CHECK(loaded(keyed()) == expected);
  // The documented defaults of the seed, spelled out once here (config.hpp holds them).
  CHECK(expected.listen == "0.0.0.0:8000");
  CHECK(expected.memory_bytes == 2LL << 30);
  CHECK(expected.nano_cpus == 1000000000);
  CHECK(expected.warm_pool == 2);
  CHECK(expected.workspace_mode == "tmpfs");
  CHECK(expected.network == "none");
  CHECK(expected.instance == "default");
  // Every variable of the table has a name of its own and a default as the doc shows it.
  std::set<std::string> names;
  for (const auto& v : config_variables()) {
    CAPTURE(v.name);
    CHECK(v.name.starts_with("SANDBOX_"));
    CHECK(names.insert(v.name).second);
    CHECK_FALSE(v.shown_default.empty());
    CHECK_FALSE(v.accepts.empty());
  }
  CHECK(names.size() >= 60);
}

TEST_CASE(
    "config: integers: blank keeps the default, below the least is raised, above the most refused",
    "[config]") {
  CHECK(loaded(keyed({{"SANDBOX_PIDS_LIMIT", "  "}})).pids_limit == 256);
  CHECK(loaded(keyed({{"SANDBOX_PIDS_LIMIT", " 512 "}})).pids_limit == 512);
  CHECK(loaded(keyed({{"SANDBOX_PIDS_LIMIT", "0"}})).pids_limit == 1);
  CHECK(loaded(keyed({{"SANDBOX_EXEC_TIMEOUT_CAP_MS", "5"}})).exec_timeout_cap_ms == 1000);
  CHECK(loaded(keyed({{"SANDBOX_INSTANCE_LEASE_S", "1"}})).instance_lease_s == 5);
  CHECK(loaded(keyed({{"SANDBOX_MAX_SESSIONS", "-3"}})).max_sessions == 0);
  CHECK(loaded(keyed({{"SANDBOX_WARM_POOL", "64"}})).warm_pool == 64);
  CHECK(errors_of(keyed({{"SANDBOX_WARM_POOL", "65"}})) ==
        std::vector<std::string>{"SANDBOX_WARM_POOL: at most 64"});
  CHECK(loaded(keyed({{"SANDBOX_EGRESS_PROXY_PORT", "65535"}})).egress_proxy_port == 65535);
  CHECK(errors_of(keyed({{"SANDBOX_EGRESS_PROXY_PORT", "65536"}})) ==
        std::vector<std::string>{"SANDBOX_EGRESS_PROXY_PORT: at most 65535"});
  for (const char* bad : {"x", "1e3", "+5", "12s", "0x10", "99999999999999999999"}) {
    CAPTURE(bad);
    CHECK(errors_of(keyed({{"SANDBOX_MAX_OUTPUT_BYTES", bad}})) ==
          std::vector<std::string>{std::string("SANDBOX_MAX_OUTPUT_BYTES: not an integer: \"") +
                                   bad + "\""});
  }
  // Every integer row reads a field of its own: each, set alone to the same value (its
  // greatest where it has one), changes the configuration, and no two change it alike.
  const auto integers = integer_variables();
  REQUIRE(integers.size() >= 30);
  std::vector<config> each;
  for (std::size_t i = 0; i < integers.size(); ++i) {
    CAPTURE(integers[i].name);
    const auto& accepts = integers[i].accepts;
    const auto dash = accepts.find("–");
    const auto value =
        dash == std::string::npos ? std::string("1000000007") : accepts.substr(dash + 3);
    each.push_back(loaded(keyed({{integers[i].name, value}})));
    CHECK_FALSE(each.back() == loaded(keyed()));
    for (std::size_t j = 0; j < i; ++j) CHECK_FALSE(each[j] == each[i]);
  }
}

TEST_CASE("config: switches read the way the seed reads each", "[config]") {
  // on: only 1/true/yes/on (any case, spaces around) turn it on.
  for (const char* on : {"1", "true", " YES ", "On"})
    CHECK(loaded(keyed({{"SANDBOX_KEEP_SESSIONS_ON_STOP", on}})).keep_sessions_on_stop);
  for (const char* off : {"0", "2", "enabled", "", "y"})
    CHECK_FALSE(loaded(keyed({{"SANDBOX_KEEP_SESSIONS_ON_STOP", off}})).keep_sessions_on_stop);
  // not off: anything but empty, 0 and false is on ("no" too: the seed's reading).
  for (const char* off : {"0", "false", " FALSE ", ""})
    CHECK_FALSE(loaded(keyed({{"SANDBOX_CELL_RUNNER", off}})).cell_runner);
  for (const char* on : {"1", "no", "anything"})
    CHECK(loaded(keyed({{"SANDBOX_CELL_RUNNER", on}})).cell_runner);
  CHECK_FALSE(load_config({{"SANDBOX_ALLOW_NO_AUTH", "off"}}).value);
  CHECK(load_config({{"SANDBOX_ALLOW_NO_AUTH", " Yes "}}).value);
}

TEST_CASE("config: sizes, numbers and the descriptor limit keep their text and their value",
          "[config]") {
  auto c = loaded(keyed(
      {{"SANDBOX_MEMORY", "3g"}, {"SANDBOX_CPUS", "0.5"}, {"SANDBOX_NOFILE_ULIMIT", "2048"}}));
  CHECK(c.memory == "3g");
  CHECK(c.memory_bytes == 3LL << 30);
  CHECK(c.cpus == "0.5");
  CHECK(c.nano_cpus == 500000000);
  CHECK((c.nofile_soft == 2048 && c.nofile_hard == 2048));
  c = loaded(keyed({{"SANDBOX_NOFILE_ULIMIT", "100:200"},
                    {"SANDBOX_MEMORY", "1.5G"},
                    {"SANDBOX_WORKSPACE_SIZE", "128m"}}));
  CHECK((c.nofile_soft == 100 && c.nofile_hard == 200));
  CHECK(c.memory_bytes == static_cast<std::int64_t>(1.5 * (1LL << 30)));
  CHECK(errors_of(keyed({{"SANDBOX_MEMORY", "lots"}})) ==
        std::vector<std::string>{"SANDBOX_MEMORY: not a size: \"lots\""});
  CHECK(errors_of(keyed({{"SANDBOX_TMPFS_SIZE", "-1m"}})) ==
        std::vector<std::string>{"SANDBOX_TMPFS_SIZE: not a size: \"-1m\""});
  for (const char* bad : {"0", "-1", "1x", "", "many"})
    CHECK(errors_of(keyed({{"SANDBOX_CPUS", bad}})) ==
          std::vector<std::string>{"SANDBOX_CPUS: not a positive number"});
  for (const char* bad : {"0", "200:100", "x", ":5"})
    CHECK(errors_of(keyed({{"SANDBOX_NOFILE_ULIMIT", bad}})) ==
          std::vector<std::string>{"SANDBOX_NOFILE_ULIMIT: expected SOFT:HARD"});
  // The seed's alias of the workspace size, and the name that wins over it.
  CHECK(loaded(keyed({{"SANDBOX_WORKSPACE_TMPFS_SIZE", "64m"}})).workspace_size == "64m");
  CHECK(loaded(keyed({{"SANDBOX_WORKSPACE_TMPFS_SIZE", "64m"}, {"SANDBOX_WORKSPACE_SIZE", "32m"}}))
            .workspace_size == "32m");
  CHECK(loaded(keyed({{"SANDBOX_API_KEY", "  "}, {"SANDBOX_ALLOW_NO_AUTH", "1"}})).api_key.empty());
}

TEST_CASE("config: lists are trimmed, lower-cased, and each entry refused by name", "[config]") {
  auto c =
      loaded(keyed({{"SANDBOX_STORAGE_ENDPOINTS", "HTTPS://Minio.Corp/ , ,*.objects.example:9443"},
                    {"SANDBOX_NETWORK", "allowlist"},
                    {"SANDBOX_EGRESS_ALLOW", " PyPI.org,,.pythonhosted.org "}}));
  CHECK(c.storage_endpoints ==
        std::vector<std::string>{"https://minio.corp", "*.objects.example:9443"});
  CHECK(c.egress_allow == std::vector<std::string>{"pypi.org", ".pythonhosted.org"});
  CHECK(errors_of(keyed({{"SANDBOX_STORAGE_ENDPOINTS", "a.example,user@evil:9000,ftp://b"}})) ==
        std::vector<std::string>{
            "SANDBOX_STORAGE_ENDPOINTS: not an endpoint: \"user@evil:9000\" (scheme://host[:port], "
            "host[:port] or *.suffix[:port])",
            "SANDBOX_STORAGE_ENDPOINTS: not an endpoint: \"ftp://b\" (scheme://host[:port], "
            "host[:port] or *.suffix[:port])"});
  CHECK(errors_of(keyed(
            {{"SANDBOX_NETWORK", "allowlist"}, {"SANDBOX_EGRESS_ALLOW", "pypi.org,10.0.0.1"}})) ==
        std::vector<std::string>{
            "SANDBOX_EGRESS_ALLOW: not a host name: \"10.0.0.1\" (names only, never "
            "an address; \".example.org\" for its subdomains too)"});
  // The fleet's members: instance=http://host:port, each instance once.
  key_file key(32);
  auto fleet = fuse_env();
  fleet["SANDBOX_FLEET_KEY_FILE"] = key.path;
  fleet["SANDBOX_FLEET_MEMBERS"] = " a=http://127.0.0.1:8001/ ,, b=http://10.0.0.2:8000";
  CHECK(loaded(fleet).fleet_members ==
        std::map<std::string, std::string>{{"a", "http://127.0.0.1:8001"},
                                           {"b", "http://10.0.0.2:8000"}});
  fleet["SANDBOX_FLEET_MEMBERS"] = "a=http://h:1,a=http://h:2,=http://h:3,c=https://h:4";
  CHECK(errors_of(fleet) ==
        std::vector<std::string>{
            "SANDBOX_FLEET_MEMBERS: instance \"a\" is listed twice",
            "SANDBOX_FLEET_MEMBERS: expected instance=http://host:port, got \"=http://h:3\"",
            "SANDBOX_FLEET_MEMBERS: expected instance=http://host:port, got \"c=https://h:4\""});
}

TEST_CASE("config: modes take their words only", "[config]") {
  CHECK(loaded(fuse_env()).workspace_mode == "fuse");
  // The workspace mode is compared as written (the seed's); the network folded, blank: none.
  CHECK(errors_of(keyed({{"SANDBOX_WORKSPACE_MODE", " fuse"}})) ==
        std::vector<std::string>{"SANDBOX_WORKSPACE_MODE must be tmpfs or fuse"});
  CHECK(loaded(keyed({{"SANDBOX_NETWORK", " "}})).network == "none");
  CHECK(loaded(keyed({{"SANDBOX_NETWORK", " AllowList "}, {"SANDBOX_EGRESS_ALLOW", "pypi.org"}}))
            .network == "allowlist");
  CHECK(errors_of(keyed({{"SANDBOX_NETWORK", "host"}})) ==
        std::vector<std::string>{"SANDBOX_NETWORK must be none or allowlist"});
  CHECK(errors_of(keyed({{"SANDBOX_INSTANCE", "Web 1"}})) ==
        std::vector<std::string>{
            "SANDBOX_INSTANCE must be 1-63 characters of a-z, 0-9, '-', '_', '.'"});
  CHECK(errors_of(keyed({{"SANDBOX_EGRESS_NETWORK", "bridge"}})) ==
        std::vector<std::string>{"SANDBOX_EGRESS_NETWORK must be a network name of its own "
                                 "(letters, digits, '-', '_', '.')"});
}

TEST_CASE(
    "config: several bad variables are all reported at once, in the table's order, then the joined "
    "rules",
    "[config]") {
  const environment env{
      {"SANDBOX_MEMORY", "lots"},       {"SANDBOX_CPUS", "0"},
      {"SANDBOX_PIDS_LIMIT", "x"},      {"SANDBOX_NOFILE_ULIMIT", "0"},
      {"SANDBOX_WARM_POOL", "65"},      {"SANDBOX_STORAGE_ENDPOINTS", "user@evil:9000"},
      {"SANDBOX_TMPFS_SIZE", "huge"},   {"SANDBOX_WORKSPACE_SIZE", "vast"},
      {"SANDBOX_FLEET_URL", "ftp://x"}, {"SANDBOX_INSTANCE", ""},
      {"SANDBOX_NETWORK", "host"},      {"SANDBOX_EGRESS_PROXY_PORT", "70000"}};
  const auto errors = errors_of(env);
  const std::vector<std::string> expected{
      "SANDBOX_MEMORY: not a size: \"lots\"", "SANDBOX_CPUS: not a positive number",
      "SANDBOX_PIDS_LIMIT: not an integer: \"x\"", "SANDBOX_NOFILE_ULIMIT: expected SOFT:HARD",
      "SANDBOX_WARM_POOL: at most 64",
      "SANDBOX_STORAGE_ENDPOINTS: not an endpoint: \"user@evil:9000\" (scheme://host[:port], "
      "host[:port] or "
      "*.suffix[:port])",
      "SANDBOX_TMPFS_SIZE: not a size: \"huge\"",
      "SANDBOX_FLEET_URL: expected http://host:port, got \"ftp://x\"",
      "SANDBOX_INSTANCE must be 1-63 characters of a-z, 0-9, '-', '_', '.'",
      "SANDBOX_NETWORK must be none or allowlist", "SANDBOX_EGRESS_PROXY_PORT: at most 65535",
      // the joined rules, after the table: a fleet is a fuse-mode thing with its key; the
      // workspace size is measured in the tmpfs mode; nobody runs open by mistake
      "SANDBOX_FLEET_URL needs SANDBOX_WORKSPACE_MODE=fuse (a fleet's sessions live in the store)",
      "SANDBOX_FLEET_URL and SANDBOX_FLEET_MEMBERS need SANDBOX_FLEET_KEY_FILE (the members' own "
      "credential: "
      "a forwarded call is signed with it, and the client's key is never passed on)",
      "SANDBOX_WORKSPACE_SIZE: not a size: \"vast\"",
      "SANDBOX_API_KEY is empty: refusing to start without auth (set SANDBOX_ALLOW_NO_AUTH=1 to "
      "run open)"};
  CHECK(errors == expected);
}

TEST_CASE("config: the rules that join variables", "[config]") {
  SECTION("the fuse mode needs its store, read only in that mode") {
    auto env = keyed({{"SANDBOX_WORKSPACE_MODE", "fuse"}});
    CHECK(errors_of(env) ==
          std::vector<std::string>{
              "SANDBOX_WORKSPACE_MODE=fuse needs AIMEM_BUCKET and AIMEM_ENDPOINT (the "
              "workspaces' store, which also keeps the sessions' records)"});
    env = fuse_env();
    env["AIMEM_ENDPOINT"] = "http://127.0.0.1:9000//";
    env["AIMEM_PREFIX"] = "team/";
    env["AIMEM_REGION"] = "eu-west-1";
    const auto c = loaded(env);
    CHECK(c.store.endpoint == "http://127.0.0.1:9000");
    CHECK(c.store.prefix == "team");
    CHECK(c.store.region == "eu-west-1");
    env["SANDBOX_WORKSPACE_MODE"] = "tmpfs";  // the store is not this mode's: left as it is
    CHECK(loaded(env).store == config::workspace_store{});
    env = fuse_env();
    env["AIMEM_ENDPOINT"] = "ftp://127.0.0.1:9000";
    const auto errors = errors_of(env);
    REQUIRE(errors.size() == 1);
    CHECK(errors[0].starts_with("AIMEM_ENDPOINT: "));
  }
  SECTION("a fleet lives in the store and needs its own key") {
    key_file good(32), short_key(31);
    auto env = fuse_env();
    env["SANDBOX_FLEET_URL"] = "http://10.77.0.11:8000/";
    CHECK(errors_of(env) ==
          std::vector<std::string>{
              "SANDBOX_FLEET_URL and SANDBOX_FLEET_MEMBERS need SANDBOX_FLEET_KEY_FILE (the "
              "members' own credential: a forwarded call is signed with it, and the "
              "client's key is never passed on)"});
    env["SANDBOX_FLEET_KEY_FILE"] = good.path;
    const auto c = loaded(env);
    CHECK(c.fleet_url == "http://10.77.0.11:8000");
    CHECK(c.fleet_key == std::string(32, 'k'));  // the trailing newline is not part of it
    env["SANDBOX_FLEET_KEY_FILE"] = short_key.path;
    CHECK(errors_of(env) ==
          std::vector<std::string>{"SANDBOX_FLEET_KEY_FILE: " + short_key.path +
                                   " must hold at least 32 bytes (the fleet's shared "
                                   "secret; e.g. openssl rand -hex 32)"});
    env["SANDBOX_FLEET_KEY_FILE"] = good.path + ".absent";
    CHECK(errors_of(env) ==
          std::vector<std::string>{"SANDBOX_FLEET_KEY_FILE: cannot read " + good.path + ".absent"});
    env["SANDBOX_FLEET_KEY_FILE"] = good.path;
    env.erase("SANDBOX_FLEET_URL");
    env["SANDBOX_FLEET_MEMBERS"] = "a=http://127.0.0.1:8001";
    env["SANDBOX_WORKSPACE_MODE"] = "tmpfs";
    CHECK(errors_of(env) ==
          std::vector<std::string>{"SANDBOX_FLEET_MEMBERS needs SANDBOX_WORKSPACE_MODE=fuse (a "
                                   "fleet's sessions live in the store)"});
  }
  SECTION("tmpfs sizes leave the interpreter half of the memory, a FUSE workspace is not counted") {
    auto env = keyed({{"SANDBOX_MEMORY", "256m"}});
    CHECK(errors_of(env) ==
          std::vector<std::string>{
              "SANDBOX_TMPFS_SIZE (/tmp and /home/sandbox) and SANDBOX_WORKSPACE_SIZE (1024 "
              "MiB together) must stay within half of SANDBOX_MEMORY (256 MiB): files "
              "filling them would take the interpreter's memory"});
    env["SANDBOX_TMPFS_SIZE"] = "16m";
    env["SANDBOX_WORKSPACE_SIZE"] = "96m";  // 2 x 16 + 96 = 128: exactly half
    CHECK(loaded(env).workspace_size == "96m");
    env["SANDBOX_WORKSPACE_SIZE"] = "97m";
    CHECK(errors_of(env).size() == 1);
    auto fuse = fuse_env();
    fuse["SANDBOX_MEMORY"] = "256m";
    fuse["SANDBOX_TMPFS_SIZE"] = "16m";
    fuse["SANDBOX_WORKSPACE_SIZE"] = "not a size either";
    CHECK(loaded(fuse).workspace_size == "not a size either");
  }
  SECTION("an allowlist of nothing is a mistake") {
    CHECK(errors_of(keyed({{"SANDBOX_NETWORK", "allowlist"}, {"SANDBOX_EGRESS_ALLOW", " , "}})) ==
          std::vector<std::string>{"SANDBOX_NETWORK=allowlist needs SANDBOX_EGRESS_ALLOW (the host "
                                   "names sessions may reach)"});
  }
  SECTION("no key means no start unless running open is written down") {
    CHECK(errors_of({{"SANDBOX_API_KEY", " "}}) ==
          std::vector<std::string>{"SANDBOX_API_KEY is empty: refusing to start without auth (set "
                                   "SANDBOX_ALLOW_NO_AUTH=1 to run open)"});
    CHECK(loaded({{"SANDBOX_ALLOW_NO_AUTH", "1"}}).allow_no_auth);
  }
}

// docs/sidecar.md's table of variables is the code's table: each of the code's variables
// has its row with the same default and what it accepts, and the doc lists no other.
TEST_CASE(
    "config: docs/sidecar.md lists every variable of the table, with its default and what it takes",
    "[config]") {
  std::ifstream in(std::string(DOCKGATE_SOURCE_DIR) + "/docs/sidecar.md");
  REQUIRE(in);
  struct row {
    std::string shown_default, accepts;
  };
  std::map<std::string, row> documented;
  for (std::string line; std::getline(in, line);) {
    if (!line.starts_with("| `SANDBOX_")) continue;
    std::vector<std::string> cells;
    std::string cell;
    for (std::size_t i = 1; i < line.size(); ++i) {
      if (line[i] == '|' && line[i - 1] != '\\') {
        cells.push_back(cell);
        cell.clear();
      } else {
        cell += line[i];
      }
    }
    auto strip = [](std::string s) {
      while (!s.empty() && s.back() == ' ') s.pop_back();
      while (!s.empty() && s.front() == ' ') s.erase(0, 1);
      if (s.size() >= 2 && s.front() == '`' && s.back() == '`') s = s.substr(1, s.size() - 2);
      return s;
    };
    REQUIRE(cells.size() >= 4);
    documented[strip(cells[0])] = {strip(cells[1]), strip(cells[2])};
  }
  std::set<std::string> in_code;
  for (const auto& v : config_variables()) {
    CAPTURE(v.name);
    in_code.insert(v.name);
    REQUIRE(documented.count(v.name));
    CHECK(documented[v.name].shown_default == v.shown_default);
    CHECK(documented[v.name].accepts == v.accepts);
  }
  for (const auto& [name, r] : documented) {
    CAPTURE(name);
    CHECK(in_code.count(name));
  }
}

TEST_CASE(
    "config: SANDBOX_RUNTIMES: runtime names in order (the first the default), a bad or repeated "
    "one refused, a gVisor default refused with allowlist",
    "[config][runtime]") {
  CHECK(loaded(keyed()).runtimes.empty());
  CHECK(default_runtime(loaded(keyed())).empty());
  const auto listed = loaded(keyed({{"SANDBOX_RUNTIMES", " runsc, runc ,,"}}));
  CHECK(listed.runtimes == std::vector<std::string>{"runsc", "runc"});
  CHECK(default_runtime(listed) == "runsc");
  CHECK(errors_of(keyed({{"SANDBOX_RUNTIMES", "runc,run sc"}})) ==
        std::vector<std::string>{"SANDBOX_RUNTIMES: not a runtime name: \"run sc\""});
  CHECK(errors_of(keyed({{"SANDBOX_RUNTIMES", "runc,runc"}})) ==
        std::vector<std::string>{"SANDBOX_RUNTIMES: \"runc\" is listed twice"});
  const environment allowlist = {{"SANDBOX_NETWORK", "allowlist"},
                                 {"SANDBOX_EGRESS_ALLOW", "pypi.org"}};
  auto with = [&](const std::string& runtimes) {
    environment env = allowlist;
    env.emplace("SANDBOX_RUNTIMES", runtimes);
    return keyed(env);
  };
  CHECK(errors_of(with("runsc,runc")) ==
        std::vector<std::string>{
            "SANDBOX_RUNTIMES: the default runtime runsc (gVisor) cannot serve "
            "SANDBOX_NETWORK=allowlist: its sandboxes have no network of their own (runsc "
            "--network=none); list runc first"});
  CHECK(loaded(with("runc,runsc")).runtimes.size() == 2);  // runsc refused per create instead
  CHECK(gvisor_runtime("runsc"));
  CHECK(gvisor_runtime("runsc-kvm"));
  CHECK_FALSE(gvisor_runtime("runc"));
  CHECK_FALSE(gvisor_runtime("runscx"));
}
