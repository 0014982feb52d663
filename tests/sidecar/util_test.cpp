#include "util/util.hpp"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "dockgate/sidecar/config.hpp"

using namespace dockgate::sidecar;

TEST_CASE("base64 round-trips and strict decoding refuses the rest", "[sidecar]") {
  for (std::string s :
       std::vector<std::string>{"", "a", "ab", "abc", "abcd", std::string("\0\xff\x10", 3)})
    CHECK(base64_decode_strict(base64_encode(s)) == s);
  CHECK(base64_encode("a,b\n1,2\n") == "YSxiCjEsMgo=");
  for (auto bad : {"YSxiCjEsMgo", "YSx=CjEs", "YS xi", "YSxi\nCjEs", "@@@@", "YQ==YQ==", "Y==="})
    CHECK_FALSE(base64_decode_strict(bad));
}

TEST_CASE("workspace paths normalise like os.path.normpath and stay under /workspace",
          "[sidecar]") {
  CHECK(workspace_path("uploads/a.csv") == "/workspace/uploads/a.csv");
  CHECK(workspace_path("/workspace") == "/workspace");
  CHECK(workspace_path("/workspace/./a//b/../c") == "/workspace/a/c");
  CHECK(workspace_path("a/../../workspace/x") == "/workspace/x");
  for (auto bad :
       {"../etc/passwd", "/etc/passwd", "/workspace/../etc", "/workspacex/y", "", "a/../../../x"})
    CHECK_FALSE(workspace_path(bad));
  CHECK_FALSE(workspace_path(std::string("a\0b", 3)));
}

TEST_CASE("shell quoting, UTF-8 repair, MIME types", "[sidecar]") {
  CHECK(shell_quote("it's") == "'it'\\''s'");
  CHECK(valid_utf8("ok \xC3\xA9") == "ok \xC3\xA9");
  CHECK(valid_utf8("cut \xC3") == "cut \xEF\xBF\xBD");
  CHECK(valid_utf8("\xff") == "\xEF\xBF\xBD");
  CHECK(mime_type_for("plot.PNG") == "image/png");
  CHECK(mime_type_for("data.bin") == "application/octet-stream");
}

TEST_CASE("configuration: defaults, clamps, refusal without a key", "[sidecar]") {
  auto none = load_config({});
  CHECK_FALSE(none.value);
  REQUIRE(none.errors.size() == 1);
  CHECK_THAT(none.errors[0], Catch::Contains("SANDBOX_API_KEY"));
  auto open = load_config({{"SANDBOX_ALLOW_NO_AUTH", " Yes "}});
  REQUIRE(open.value);
  CHECK(open.value->allow_no_auth);
  CHECK(open.value->memory_bytes == 2LL << 30);
  CHECK(open.value->exec_timeout_cap_ms == 600000);
  CHECK(open.value->max_output_bytes == 32768);
  CHECK(open.value->listen == "0.0.0.0:8000");
  CHECK_FALSE(load_config({{"SANDBOX_ALLOW_NO_AUTH", "False"}}).value);
  auto c = load_config({{"SANDBOX_API_KEY", "k"},
                        {"SANDBOX_MEMORY", "3g"},
                        {"SANDBOX_CPUS", "0.5"},
                        {"SANDBOX_WORKSPACE_TMPFS_SIZE", "1g"},
                        {"SANDBOX_MAX_SESSIONS", "-3"},
                        {"SANDBOX_READ_ONLY_ROOTFS", "0"},
                        {"SANDBOX_PULL_ON_START", "yes"}});
  REQUIRE(c.value);
  CHECK(c.value->memory_bytes == 3LL << 30);
  CHECK(c.value->nano_cpus == 500000000);
  CHECK(c.value->workspace_size == "1g");
  CHECK(c.value->max_sessions == 0);
  CHECK_FALSE(c.value->read_only_rootfs);
  CHECK(c.value->pull_on_start);
  auto bad = load_config(
      {{"SANDBOX_API_KEY", "k"}, {"SANDBOX_MEMORY", "lots"}, {"SANDBOX_PIDS_LIMIT", "x"}});
  CHECK(bad.errors.size() == 2);  // (the tmpfs check measures against the default memory then)
  CHECK(parse_size("1.5g") == static_cast<std::int64_t>(1.5 * (1LL << 30)));
}

TEST_CASE("config: tmpfs sizes must leave the interpreter half of the memory limit") {
  const std::map<std::string, std::string> base{{"SANDBOX_API_KEY", "k"}};
  CHECK(load_config(base).value);  // defaults: 2 x 256m + 512m within half of 2g
  auto small = base;
  small["SANDBOX_MEMORY"] = "256m";
  auto refused = load_config(small);
  REQUIRE_FALSE(refused.value);
  CHECK(refused.errors.front().find("must stay within half of SANDBOX_MEMORY (256 MiB)") !=
        std::string::npos);
  small["SANDBOX_TMPFS_SIZE"] = "16m";
  small["SANDBOX_WORKSPACE_SIZE"] = "64m";
  CHECK(load_config(small).value);
  small["SANDBOX_WORKSPACE_SIZE"] = "1g";
  small["SANDBOX_WORKSPACE_MODE"] = "fuse";  // not a tmpfs: not counted
  small["AIMEM_BUCKET"] = "b";
  small["AIMEM_ENDPOINT"] = "http://127.0.0.1:9000";
  CHECK(load_config(small).value);
}

TEST_CASE(
    "config: the FUSE workspace mode needs its store, and SANDBOX_FLEET_URL is http://host:port in "
    "that mode") {
  std::map<std::string, std::string> env{{"SANDBOX_API_KEY", "k"},
                                         {"SANDBOX_WORKSPACE_MODE", "fuse"}};
  auto refused = load_config(env);
  REQUIRE_FALSE(refused.value);
  CHECK(refused.errors.front().find("needs AIMEM_BUCKET and AIMEM_ENDPOINT") != std::string::npos);
  env["AIMEM_BUCKET"] = "b";
  env["AIMEM_ENDPOINT"] = "http://127.0.0.1:9000/";
  env["AIMEM_PREFIX"] = "team/";
  auto ok = load_config(env);
  REQUIRE(ok.value);
  CHECK(ok.value->store.endpoint == "http://127.0.0.1:9000");
  CHECK(ok.value->store.prefix == "team");
  for (const char* bad :
       {"127.0.0.1:8000", "https://10.0.0.1:8000", "http://10.0.0.1", "http://10.0.0.1:8000/x"}) {
    env["SANDBOX_FLEET_URL"] = bad;
    INFO(bad);
    CHECK_FALSE(load_config(env).value);
  }
  env["SANDBOX_FLEET_URL"] = "http://10.77.0.11:8000/";
  // A member needs the fleet's own credential (sidecar/src/fleet/fleet_auth.hpp).
  auto keyless = load_config(env);
  REQUIRE_FALSE(keyless.value);
  CHECK(keyless.errors.front().find("need SANDBOX_FLEET_KEY_FILE") != std::string::npos);
  const std::string key_file =
      "/tmp/dockgate-util-test-fleet-" + std::to_string(::getpid()) + ".key";
  std::ofstream(key_file) << "0123456789abcdef0123456789abcdef\n";
  env["SANDBOX_FLEET_KEY_FILE"] = key_file;
  auto member = load_config(env);
  std::remove(key_file.c_str());
  REQUIRE(member.value);
  CHECK(member.value->fleet_url == "http://10.77.0.11:8000");
  env["SANDBOX_WORKSPACE_MODE"] = "tmpfs";  // a fleet's sessions live in the store
  CHECK_FALSE(load_config(env).value);
}

TEST_CASE("config: SANDBOX_NETWORK=allowlist takes host names only and never an address") {
  const std::map<std::string, std::string> base{{"SANDBOX_API_KEY", "k"}};
  auto none = load_config(base);
  REQUIRE(none.value);
  CHECK(none.value->network == "none");  // the seed's: no network unless asked
  auto on = base;
  on["SANDBOX_NETWORK"] = "allowlist";
  CHECK_FALSE(load_config(on).value);  // an allowlist of nothing is a mistake
  on["SANDBOX_EGRESS_ALLOW"] = " PyPI.org, .pythonhosted.org ,files.example-1.test";
  // The sessions' lists go to the proxy through a directory (egress_policy.hpp): an
  // absolute one that is there, or no start.
  for (const char* dir : {"", "relative/dir", "/nonexistent/dockgate-policies"}) {
    CAPTURE(dir);
    on["SANDBOX_EGRESS_POLICY_DIR"] = dir;
    auto refused = load_config(on);
    CHECK_FALSE(refused.value);
    CHECK(std::find(refused.errors.begin(), refused.errors.end(),
                    "SANDBOX_NETWORK=allowlist needs SANDBOX_EGRESS_POLICY_DIR: an absolute path "
                    "of a directory the sidecar writes and the egress proxy reads (its "
                    "EGRESS_POLICY_DIR)") != refused.errors.end());
  }
  on["SANDBOX_EGRESS_POLICY_DIR"] = std::filesystem::temp_directory_path().string();
  auto c = load_config(on);
  REQUIRE(c.value);
  CHECK(c.value->egress_allow ==
        std::vector<std::string>{"pypi.org", ".pythonhosted.org", "files.example-1.test"});
  CHECK(c.value->egress_network == "dockgate-egress");
  CHECK(c.value->egress_proxy_port == 3128);
  for (const char* bad :
       {"10.0.0.1", "127.1", "2130706433", "0x7f000001", "[::1]", "::1", "pypi.org:443",
        "*.pypi.org", "pypi..org", "-pypi.org", "pypi.org.", "http://pypi.org", "a/b", "."}) {
    CAPTURE(bad);
    CHECK_FALSE(valid_egress_name(bad));
    auto b = on;
    b["SANDBOX_EGRESS_ALLOW"] = std::string("pypi.org,") + bad;
    CHECK_FALSE(load_config(b).value);
  }
  for (const char* name : {"pypi.org", ".pythonhosted.org", "localhost", "x1.test", "a-b.c-d"}) {
    CAPTURE(name);
    CHECK(valid_egress_name(name));
  }
  for (const char* net : {"host", "bridge", "none", "", "a b"}) {
    CAPTURE(net);
    auto b = on;
    b["SANDBOX_EGRESS_NETWORK"] = net;
    CHECK_FALSE(load_config(b).value);
  }
  auto mode = base;
  mode["SANDBOX_NETWORK"] = "host";
  CHECK_FALSE(load_config(mode).value);
}
