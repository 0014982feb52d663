// A sandbox's networkPolicy as its own egress list (docs/opensandbox-api.md, "networkPolicy";
// docs/sidecar.md, "Egress"), over a session core on the fake engine: refused with the
// reason while egress is off, or when it asks for more than the operator's list; under
// SANDBOX_NETWORK=allowlist the file the egress proxy reads for the sandbox's network
// (named by its gateway, as the engine gave it), judged by that file's bytes and by what
// scripts/egress-policy-helper.sh (squid's helper) answers from it; GET /sandboxes/{id}
// and the egress API's GET /policy answer the list in force. Squid itself is the
// integration test's (sidecar_egress_test.cpp).
#include <simdjson.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/session_core.hpp"
#include "egress/egress_policy.hpp"
#include "engine/labels.hpp"
#include "fake_engine.hpp"
#include "fleet/fleet_store.hpp"
#include "front/opensandbox/access_token.hpp"
#include "front/opensandbox/routes.hpp"

using namespace dockgate;
using namespace dockgate::sidecar;

namespace {

const std::string key = "the-api-key";

// A directory of its own for the lists, removed at the end.
struct policy_dir {
  std::filesystem::path path = std::filesystem::temp_directory_path() /
                               ("dg-netpolicy-" + std::to_string(::getpid()) + "-" +
                                std::to_string(reinterpret_cast<std::uintptr_t>(this)));
  policy_dir() { std::filesystem::create_directories(path); }
  ~policy_dir() { std::filesystem::remove_all(path); }
  std::vector<std::string> files() const {
    std::vector<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(path))
      out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }
  std::string read(const std::string& name) const {
    std::ifstream in(path / name);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
};

config np_config(const std::string& network, const std::string& dir, int warm_pool) {
  config c;
  c.warm_pool = warm_pool;
  c.cell_runner = false;
  c.api_key = key;
  c.image = "python:3.12-slim";  // the warm pool's: a sandbox of it may take a warm container
  c.images = {"python:3.12-slim"};
  c.network = network;
  c.egress_allow = {"a.example", ".c.example"};
  c.egress_policy_dir = dir;
  return c;
}

struct np_front {
  policy_dir dir;
  config c;
  testing::fake_engine engine;
  session_core core{c, engine, nullptr};
  explicit np_front(const std::string& network = "allowlist", int warm_pool = 0)
      : c(np_config(network, dir.path.string(), warm_pool)) {}

  http_reply call(const std::string& method, const std::string& target,
                  const std::string& body = "",
                  header_fields fields = {{"open-sandbox-api-key", key}}) {
    http_request r;
    r.method = method;
    r.path = target;
    r.body = body;
    r.fields = std::move(fields);
    return opensandbox::serve(core, r);
  }
  // POST /v1/sandboxes with `policy` as its networkPolicy ("" for none).
  http_reply create(const std::string& policy) {
    std::string body =
        R"({"image":{"uri":"python:3.12-slim"},"entrypoint":["tail","-f","/dev/null"])";
    if (!policy.empty()) body += R"(,"networkPolicy":)" + policy;
    return call("POST", "/v1/sandboxes", body + "}");
  }
  std::string made(const std::string& policy) {
    auto r = create(policy);
    INFO(r.body);
    REQUIRE(r.status == 202);
    return r.body.substr(7, 32);
  }
  // The gateway of the network of sandbox `id`'s container, as the engine answers it.
  std::string gateway_of(const std::string& id) {
    auto n = engine.network_inspect("dockgate-egress-" + id, std::chrono::seconds(1));
    REQUIRE(n.status == 200);
    const auto at = n.body.find(R"("Gateway":")");
    REQUIRE(at != std::string::npos);
    return n.body.substr(at + 11, n.body.find('"', at + 11) - at - 11);
  }
};

std::string bad(const std::string& message) {
  return R"({"code":"SANDBOX::INVALID_PARAMETER","message":")" + message + R"("})";
}

// What squid's helper answers for `name` arriving on `gateway`, the lists in `dir`.
std::string helper_says(const std::string& dir, const std::string& gateway,
                        const std::string& name) {
  const std::string cmd = "echo '" + gateway + " " + name + "' | " +
                          std::string(DOCKGATE_SOURCE_DIR) + "/scripts/egress-policy-helper.sh " +
                          dir;
  std::string out;
  if (FILE* p = ::popen(cmd.c_str(), "r")) {
    char buf[64];
    while (std::fgets(buf, sizeof buf, p)) out += buf;
    ::pclose(p);
  }
  return out;
}

}  // namespace

TEST_CASE("opensandbox networkPolicy: refused with the reason while egress is off",
          "[opensandbox][netpolicy]") {
  np_front f("none");
  for (const std::string policy : {R"({"defaultAction":"deny","egress":[]})", "{}",
                                   R"({"egress":[{"action":"allow","target":"a.example"}]})"}) {
    CAPTURE(policy);
    auto r = f.create(policy);
    CHECK(r.status == 400);
    CHECK(r.body == bad("networkPolicy: egress is off on this sidecar (SANDBOX_NETWORK=none): a "
                        "sandbox has no network, so no policy can be honoured"));
  }
  CHECK(f.engine.count("create") == 0);
  // Without one: no network at all, and nothing said of a policy.
  const std::string id = f.made("");
  CHECK(f.engine.find("dockgate-sbx-" + id)->network_mode == "none");
  CHECK(f.call("GET", "/v1/sandboxes/" + id).body.find("networkPolicy") == std::string::npos);
  CHECK(f.dir.files().empty());
}

TEST_CASE("opensandbox networkPolicy: more than the operator's list is refused, naming the names",
          "[opensandbox][netpolicy]") {
  np_front f;
  const std::vector<std::pair<std::string, std::string>> rows = {
      {R"({"defaultAction":"allow"})",
       "networkPolicy.defaultAction allow: a sandbox reaches at most the operator's names "
       "(a.example,.c.example); list those it needs as allow rules"},
      {R"({"defaultAction":"maybe"})", "networkPolicy.defaultAction: allow or deny"},
      {R"({"egress":[{"action":"allow","target":"b.example"},{"action":"allow","target":"*.a.example"},{"action":"deny","target":"x.b.example"},{"action":"allow","target":"c.example"}]})",
       "networkPolicy.egress: beyond the operator's list "
       "(SANDBOX_EGRESS_ALLOW=a.example,.c.example): "
       "b.example, *.a.example"},
      {R"({"egress":[{"action":"allow","target":"10.0.0.1"}]})",
       "networkPolicy.egress[0].target: a host name or *.<host name> (never an address, a CIDR, a "
       "port or a scheme): 10.0.0.1"},
      {R"({"egress":[{"action":"allow","target":"10.0.0.0/8"}]})",
       "networkPolicy.egress[0].target: a host name or *.<host name> (never an address, a CIDR, a "
       "port or a scheme): 10.0.0.0/8"},
      {R"({"egress":[{"action":"allow","target":"a.example:443"}]})",
       "networkPolicy.egress[0].target: a host name or *.<host name> (never an address, a CIDR, a "
       "port or a scheme): a.example:443"},
      {R"({"egress":[{"action":"allow","target":".c.example"}]})",
       "networkPolicy.egress[0].target: a host name or *.<host name> (never an address, a CIDR, a "
       "port or a scheme): .c.example"},
      {R"({"egress":[{"action":"block","target":"a.example"}]})",
       "networkPolicy.egress[0].action: allow or deny"},
      {R"({"egress":[{"target":"a.example"}]})", "networkPolicy.egress[0].action: allow or deny"},
      {R"({"egress":[{"action":"allow"}]})", "networkPolicy.egress[0].target: required"},
      {R"({"egress":[{"action":"allow","target":"a.example","port":443}]})",
       "networkPolicy.egress[0].port: unknown field"},
      {R"({"egress":{}})", "networkPolicy.egress: must be an array"},
      {R"({"egress":[1]})", "networkPolicy.egress[0]: must be an object"},
      {R"({"rules":[]})", "networkPolicy.rules: unknown field"},
      {"[]", "networkPolicy: must be an object"},
  };
  for (const auto& [policy, message] : rows) {
    CAPTURE(policy);
    auto r = f.create(policy);
    CHECK(r.status == 400);
    CHECK(r.body == bad(message));
  }
  CHECK(f.engine.count("create") == 0);
  CHECK(f.dir.files().empty());
}

TEST_CASE(
    "opensandbox networkPolicy: the sandbox's list is the file its proxy reads, and goes "
    "with it",
    "[opensandbox][netpolicy]") {
  np_front f;
  const std::string id = f.made(
      R"({"defaultAction":"deny","egress":[{"action":"allow","target":"A.Example."},)"
      R"({"action":"deny","target":"bad.c.example"},{"action":"allow","target":"*.c.example"}]})");
  const std::string other = f.made("");  // no policy: no name at all
  const std::string gw = f.gateway_of(id), other_gw = f.gateway_of(other);
  REQUIRE(gw != other_gw);
  CHECK(f.dir.files() == std::vector<std::string>{std::min(gw, other_gw), std::max(gw, other_gw)});
  CHECK(f.dir.read(gw) == "allow a.example\ndeny bad.c.example\nallow *.c.example\n");
  CHECK(f.dir.read(other_gw).empty());
  // The container: on its own network, the proxy named, the list in a label (adoption).
  auto c = f.engine.find("dockgate-sbx-" + id);
  REQUIRE(c);
  CHECK(c->network_mode == "dockgate-egress-" + id);
  CHECK(c->body.find("\"HTTP_PROXY=http://" + gw + ":3128\"") != std::string::npos);
  CHECK(c->labels.at(std::string(egress_policy_label)) == f.dir.read(gw));
  CHECK(
      f.engine.find("dockgate-sbx-" + other)->labels.at(std::string(egress_policy_label)).empty());
  // What squid's helper makes of the file: the first rule that matches decides, else no.
  const std::string d = f.dir.path.string();
  CHECK(helper_says(d, gw, "a.example") == "OK\n");
  CHECK(helper_says(d, gw, "A.EXAMPLE.") == "OK\n");
  CHECK(helper_says(d, gw, "x.a.example") == "ERR\n");
  CHECK(helper_says(d, gw, "files.c.example") == "OK\n");
  CHECK(helper_says(d, gw, "bad.c.example") == "ERR\n");
  CHECK(helper_says(d, gw, "c.example") == "ERR\n");  // *.c.example: not the name itself
  CHECK(helper_says(d, gw, "-") == "ERR\n");          // no SNI
  CHECK(helper_says(d, other_gw, "a.example") == "ERR\n");
  CHECK(helper_says(d, "172.30.99.1", "a.example") == "ERR\n");  // no file: nothing
  CHECK(helper_says(d, "../" + gw, "a.example") == "ERR\n");
  // The policy in force, in the lifecycle API and the egress API (read-only).
  const std::string policy =
      R"({"defaultAction":"deny","egress":[{"action":"allow","target":"a.example"},)"
      R"({"action":"deny","target":"bad.c.example"},{"action":"allow","target":"*.c.example"}]})";
  CHECK(f.call("GET", "/v1/sandboxes/" + id).body.find(R"("networkPolicy":)" + policy) !=
        std::string::npos);
  const header_fields token = {{"x-execd-access-token", opensandbox::access_token(f.c, id)}};
  auto got = f.call("GET", "/sandboxes/" + id + "/proxy/18080/policy", "", token);
  CHECK(got.status == 200);
  CHECK(got.body ==
        R"({"status":"ok","mode":"allow_list","enforcementMode":"proxy","policy":)" + policy + "}");
  auto patch = f.call("PATCH", "/sandboxes/" + id + "/proxy/18080/policy", "[]", token);
  CHECK(patch.status == 501);
  CHECK(patch.body.find("fixed at create") != std::string::npos);
  // Deleted: its file goes (before its network), the other's stays.
  CHECK(f.call("DELETE", "/v1/sandboxes/" + id).status == 204);
  CHECK(f.dir.files() == std::vector<std::string>{other_gw});
  CHECK(f.engine.network_inspect("dockgate-egress-" + id, std::chrono::seconds(1)).status == 404);
}

TEST_CASE(
    "egress policy: a session without its own list gets the operator's, a failed write "
    "leaves no list",
    "[opensandbox][netpolicy]") {
  np_front f;
  // An Aivory session (no list of its own): the operator's names, as squid's dstdomain reads
  // them (".c.example": the name and every name under it).
  auto created = f.core.lifecycle.create_session(create_request{});
  REQUIRE(created);
  const std::string gw = f.gateway_of(created->session_id);
  CHECK(f.dir.read(gw) == "allow a.example\nallow .c.example\n");
  const std::string d = f.dir.path.string();
  CHECK(helper_says(d, gw, "c.example") == "OK\n");
  CHECK(helper_says(d, gw, "x.c.example") == "OK\n");
  CHECK(helper_says(d, gw, "xc.example") == "ERR\n");
  // Round trip of the label's text; a write that cannot happen leaves no file behind.
  const egress_rules rules = {{true, "a.example"}, {false, "*.c.example"}};
  CHECK(parse_egress_policy_text(egress_policy_text(rules)) == rules);
  CHECK_FALSE(parse_egress_policy_text("allow 10.0.0.1\n"));
  CHECK(write_egress_policy(f.c, "../x", rules));
  config gone = f.c;
  gone.egress_policy_dir = d + "/missing";
  CHECK(write_egress_policy(gone, "172.30.200.1", rules));
  CHECK_FALSE(std::filesystem::exists(d + "/missing/172.30.200.1"));
}

TEST_CASE("egress policy: a session's own list goes with its fleet record",
          "[opensandbox][netpolicy]") {
  // A takeover by another member keeps the list (session_lifecycle::take_over), never the
  // operator's wider one in its place.
  session_record r;
  r.session_id = "s1";
  r.archive_key = "s1";
  r.owner = "a";
  r.egress_policy = "allow a.example\n";
  auto back = session_record::parse(r.to_json());
  REQUIRE(back);
  CHECK(back->egress_policy == std::optional<std::string>("allow a.example\n"));
  r.egress_policy = std::string();  // a list of no names is a list
  CHECK(session_record::parse(r.to_json())->egress_policy == std::optional<std::string>(""));
  r.egress_policy.reset();
  CHECK_FALSE(session_record::parse(r.to_json())->egress_policy);
}

TEST_CASE("egress policy: a restarted sidecar adopts a sandbox with its own list",
          "[opensandbox][netpolicy]") {
  np_front f;
  const std::string id = f.made(R"({"egress":[{"action":"allow","target":"a.example"}]})");
  const std::string none = f.made("");
  // Another core over the same engine (a restart): the lists come back from the labels,
  // an empty one as no names (never the operator's list in its place).
  session_core restarted{f.c, f.engine, nullptr};
  restarted.lifecycle.reconcile();
  auto s = restarted.registry.find(id);
  REQUIRE(s);
  CHECK(s->egress_policy == std::optional<egress_rules>(egress_rules{{true, "a.example"}}));
  auto n = restarted.registry.find(none);
  REQUIRE(n);
  CHECK(n->egress_policy == std::optional<egress_rules>(egress_rules{}));
}

TEST_CASE(
    "egress policy: a warm container has the operator's list and never serves a sandbox "
    "with its own",
    "[opensandbox][netpolicy]") {
  np_front f("allowlist", 1);
  f.core.pool.start();
  std::optional<testing::fake_engine::container> warm;
  for (int i = 0; i < 500 && !warm; ++i) {
    for (const auto& k : f.engine.containers())
      if (k.labels.contains(std::string(pool_label))) warm = k;
    if (!warm) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  REQUIRE(warm);
  const std::string warm_sid = warm->labels.at(std::string(session_label));
  CHECK(f.dir.read(f.gateway_of(warm_sid)) == "allow a.example\nallow .c.example\n");
  // A sandbox with a list of its own gets a container (and a network, and a file) of its own.
  const std::string id = f.made(R"({"egress":[{"action":"allow","target":"a.example"}]})");
  CHECK(id != warm_sid);
  CHECK(f.dir.read(f.gateway_of(id)) == "allow a.example\n");
  CHECK(f.dir.read(f.gateway_of(warm_sid)) == "allow a.example\nallow .c.example\n");
  CHECK_FALSE(f.engine.find(std::string(container_prefix) + warm_sid + std::string(claim_suffix)));
  f.core.pool.stop();
}
