// The audit line an investigator reads (docs/operating.md, "Audit lines"): when, which
// request (the ID the client was also told), who (the kernel's word for a unix peer and
// the name its process gives itself), and which object, judged by the daemon's own record.
// Every line any test's gate writes is also checked against docs/audit.schema.json (the
// harness's proxy_process, when it ends).
#include <simdjson.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <ctime>
#include <fstream>
#include <iomanip>
#include <regex>
#include <sstream>
#include <thread>

#include "harness.hpp"

using namespace dockgate::test;
using namespace std::chrono_literals;

namespace {

std::string direct() {
  return docker_cli() + " -H " + engine_host();
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  return s;
}

// The audit lines of `proxy` whose operation is `operation`, once there are `want` of them
// (lines are written about once a second).
std::vector<std::string> lines_of(const proxy_process& proxy, const std::string& operation,
                                  std::size_t want = 1) {
  std::vector<std::string> found;
  for (int i = 0; i < 150 && found.size() < want; ++i) {
    found.clear();
    std::istringstream in(proxy.audit_log());
    for (std::string line; std::getline(in, line);)
      if (line.find("\"operation\":\"" + operation + "\"") != std::string::npos)
        found.push_back(line);
    if (found.size() < want) std::this_thread::sleep_for(20ms);
  }
  return found;
}

std::string field(const std::string& line, const char* key, const char* sub = nullptr) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.parse(line).get(doc) != simdjson::SUCCESS) return "(not JSON)";
  simdjson::dom::element e;
  if (doc[key].get(e) != simdjson::SUCCESS) return "(absent)";
  if (sub && e[sub].get(e) != simdjson::SUCCESS) return "(absent)";
  std::string_view s;
  if (e.get_string().get(s) == simdjson::SUCCESS) return std::string(s);
  std::int64_t n = 0;
  if (e.get_int64().get(n) == simdjson::SUCCESS) return std::to_string(n);
  return simdjson::to_string(e);
}

// The value of header `name` in the first response of `bytes`, empty if none.
std::string header(const std::string& bytes, const std::string& name) {
  const auto end = bytes.find("\r\n\r\n");
  const auto at = bytes.find("\r\n" + name + ": ");
  if (at == std::string::npos || at > end) return {};
  const auto from = at + 4 + name.size();
  return bytes.substr(from, bytes.find("\r\n", from) - from);
}

// Seconds since the epoch of an RFC 3339 UTC time with microseconds, from the line itself.
std::chrono::system_clock::time_point parse_time(const std::string& t) {
  std::tm tm{};
  std::istringstream in(t);
  in >> std::get_time(&tm, "%Y-%m-%dT%H:%M:%S");
  const auto us = std::stoll(t.substr(20, 6));
  return std::chrono::system_clock::from_time_t(::timegm(&tm)) + std::chrono::microseconds(us);
}

}  // namespace

TEST_CASE("every answer names its request, and the audit line carries the same ID",
          "[integration][audit]") {
  proxy_process proxy(R"({"default_profile":"ping","profiles":{"ping":{"allow":["SystemPing"]}}})");
  const auto before = std::chrono::system_clock::now();
  auto allowed = raw_exchange(proxy.socket_path(), "GET /_ping HTTP/1.1\r\nHost: d\r\n\r\n", true);
  auto refused =
      raw_exchange(proxy.socket_path(), "GET /version HTTP/1.1\r\nHost: d\r\n\r\n", true);
  auto malformed = raw_exchange(proxy.socket_path(), "GET /_ping HTTP/1.1\r\n\r\n", true);
  const auto after = std::chrono::system_clock::now();
  REQUIRE(allowed.status() == 200);
  REQUIRE(refused.status() == 403);
  REQUIRE(malformed.status() == 400);
  const std::string ids[] = {header(allowed.bytes, "Dockgate-Request-Id"),
                             header(refused.bytes, "Dockgate-Request-Id"),
                             header(malformed.bytes, "Dockgate-Request-Id")};
  for (const auto& id : ids)
    CHECK(std::regex_match(id, std::regex("[0-9a-f]{8}-[0-9a-f]{12,16}")));  // the schema's
  CHECK(ids[0] != ids[1]);
  CHECK(ids[1] != ids[2]);
  CHECK(allowed.bytes.find("Dockgate-Request-Id") == allowed.bytes.rfind("Dockgate-Request-Id"));

  const auto pings = lines_of(proxy, "SystemPing", 1);
  const auto versions = lines_of(proxy, "SystemVersion", 1);
  REQUIRE(pings.size() == 1);
  REQUIRE(versions.size() == 1);
  INFO(pings[0]);
  INFO(versions[0]);
  CHECK(field(pings[0], "request_id") == ids[0]);
  CHECK(field(versions[0], "request_id") == ids[1]);
  CHECK(field(versions[0], "verdict") == "deny");
  CHECK(proxy.audit_contains("\"request_id\":\"" + ids[2] + "\""));
  // The time the head arrived, as the wall clock read it around the exchange.
  const auto t = parse_time(field(pings[0], "time"));
  CHECK(t >= std::chrono::floor<std::chrono::microseconds>(before));
  CHECK(t <= after);
  // The test process as the kernel names it: its uid and pid, and its own name.
  CHECK(field(pings[0], "client", "transport") == "unix");
  CHECK(field(pings[0], "client", "uid") == std::to_string(::getuid()));
  CHECK(field(pings[0], "client", "pid") == std::to_string(::getpid()));
  std::ifstream comm("/proc/self/comm");
  std::string own;
  std::getline(comm, own);
  CHECK(field(pings[0], "client", "process") == own);
}

TEST_CASE("the audit line names the container a request created or acted on, by the daemon's ID",
          "[integration][audit]") {
  proxy_process proxy("compose/policies/docker-cli.json");
  const auto name = unique_name("dg-audited");
  struct cleanup {
    std::string n;
    ~cleanup() { run(direct() + " rm -f " + n + " >/dev/null 2>&1"); }
  } c{name};
  auto created = run(proxy.docker() + " create --name " + name + " " + test_image() + " sleep 60");
  INFO(created.output);
  REQUIRE(created.status == 0);
  REQUIRE(run(proxy.docker() + " start " + name).status == 0);
  REQUIRE(run(proxy.docker() + " exec " + name + " true").status == 0);
  const std::string id = trim(run(direct() + " inspect --format '{{.Id}}' " + name).output);
  REQUIRE(id.size() == 64);

  const auto creates = lines_of(proxy, "ContainerCreate");
  const auto starts = lines_of(proxy, "ContainerStart");
  REQUIRE(creates.size() == 1);
  REQUIRE(starts.size() == 1);
  INFO(creates[0]);
  INFO(starts[0]);
  CHECK(field(creates[0], "object", "type") == "container");
  CHECK(field(creates[0], "object", "name") == name);
  // The ID the daemon answered the create with (a plain create has no warnings to add: the
  // gate reads the answer for its ID alone) and the image the body named.
  CHECK(field(creates[0], "object", "id") == id);
  CHECK(field(creates[0], "object", "image") == test_image());
  // The exec the daemon created, and the start that names it.
  const auto execs = lines_of(proxy, "ContainerExec");
  const auto exec_starts = lines_of(proxy, "ExecStart");
  REQUIRE(execs.size() == 1);
  REQUIRE(exec_starts.size() == 1);
  INFO(execs[0]);
  INFO(exec_starts[0]);
  const std::string exec_id = field(execs[0], "object", "exec_id");
  CHECK(exec_id.size() == 64);
  CHECK(field(execs[0], "object", "id") == id);
  CHECK(field(exec_starts[0], "object", "type") == "exec");
  CHECK(field(exec_starts[0], "object", "name") == exec_id);
  // docker start names the container as the user did; the gate forwarded the full ID it
  // resolved, the one the daemon holds for that name.
  CHECK(field(starts[0], "object", "name") == name);
  CHECK(field(starts[0], "object", "id") == id);
  CHECK(field(starts[0], "client", "process") == "docker");
}

TEST_CASE("the audit line names the network and volume a create body names",
          "[integration][audit]") {
  proxy_process proxy("compose/policies/compose.json");
  const auto net = unique_name("dg-audited-net");
  const auto vol = unique_name("dg-audited-vol");
  struct cleanup {
    std::string n, v;
    ~cleanup() {
      run(direct() + " network rm " + n + " >/dev/null 2>&1");
      run(direct() + " volume rm " + v + " >/dev/null 2>&1");
    }
  } c{net, vol};
  REQUIRE(run(proxy.docker() + " network create " + net).status == 0);
  REQUIRE(run(proxy.docker() + " volume create " + vol).status == 0);
  // The daemon holds both under the names the lines give.
  REQUIRE(run(direct() + " network inspect " + net).status == 0);
  REQUIRE(run(direct() + " volume inspect " + vol).status == 0);
  const auto networks = lines_of(proxy, "NetworkCreate");
  const auto volumes = lines_of(proxy, "VolumeCreate");
  REQUIRE(networks.size() == 1);
  REQUIRE(volumes.size() == 1);
  INFO(networks[0]);
  INFO(volumes[0]);
  CHECK(field(networks[0], "object", "type") == "network");
  CHECK(field(networks[0], "object", "name") == net);
  CHECK(field(volumes[0], "object", "type") == "volume");
  CHECK(field(volumes[0], "object", "name") == vol);
}
