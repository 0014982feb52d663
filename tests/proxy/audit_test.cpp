#include "dockgate/proxy/audit.hpp"

#include <fcntl.h>
#include <spdlog/sinks/null_sink.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "audit_outputs.hpp"
#include "audit_sink.hpp"

using namespace dockgate::proxy;

namespace {

audit_record sample() {
  audit_record r;
  r.time = std::chrono::sys_days{std::chrono::year{2026} / 12 / 1} + std::chrono::hours{20} +
           std::chrono::minutes{14} + std::chrono::seconds{11} + std::chrono::microseconds{7};
  r.request_id = "0a1b2c3d-00000000002a";
  r.profile = "cli";
  r.method = "POST";
  r.path = "/v1.41/containers/create";
  r.operation = "ContainerCreate";
  r.verdict = "deny";
  r.rule = "operation";
  r.reason = "dockgate: \"x\"";
  r.status = 403;
  r.duration_ms = 1.5;
  return r;
}

// The lines through scripts/check-audit-log.py against docs/audit.schema.json: its exit
// status (0: every line matches) and what it said.
std::pair<int, std::string> check_lines(const std::string& lines) {
  char path[] = "/tmp/dockgate-audit-test.XXXXXX";
  const int fd = ::mkstemp(path);
  REQUIRE(fd >= 0);
  ::close(fd);
  std::ofstream(path) << lines;
  const std::string root = DOCKGATE_SOURCE_DIR;
  const std::string command = "/usr/bin/python3 " + root + "/scripts/check-audit-log.py " + root +
                              "/docs/audit.schema.json " + path + " 2>&1";
  std::string said;
  FILE* p = ::popen(command.c_str(), "r");
  REQUIRE(p);
  char buf[4096];
  while (std::size_t n = std::fread(buf, 1, sizeof buf, p)) said.append(buf, n);
  const int status = ::pclose(p);
  ::unlink(path);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, said};
}

}  // namespace

TEST_CASE("audit lines are one JSON object", "[audit]") {
  audit_client who;
  who.transport = "unix";
  who.uid = 0;
  who.gid = 0;
  who.pid = 1;
  who.process = "docker";
  const std::string client = format_audit_client(who);
  auto r = sample();
  r.client = client;
  r.object_type = audit_object_type(r.operation);
  r.object_name = "web";
  CHECK(
      format_audit(r) ==
      R"({"time":"2026-12-01T20:14:11.000007Z","request_id":"0a1b2c3d-00000000002a","client":{"transport":"unix","uid":0,"gid":0,"pid":1,"process":"docker"},"profile":"cli","method":"POST","path":"/v1.41/containers/create","operation":"ContainerCreate","verdict":"deny","rule":"operation","reason":"dockgate: \"x\"","status":403,"bytes_in":0,"bytes_out":0,"duration_ms":1.500,"object":{"type":"container","name":"web"}})");
}

TEST_CASE("audit durations are milliseconds with three decimals, rounded", "[audit]") {
  auto r = sample();
  const std::pair<double, std::string_view> cases[] = {
      {0.0, "0.000"},       {0.0004, "0.000"},
      {0.0006, "0.001"},    {12.3456, "12.346"},
      {1234.0, "1234.000"}, {999.9996, "1000.000"},
      {-1.0, "0.000"},      {86400000.25, "86400000.250"}};
  for (const auto& [ms, text] : cases) {
    r.duration_ms = ms;
    const std::string line = format_audit(r);
    INFO(ms);
    const std::string field = ",\"duration_ms\":" + std::string(text);
    const auto at = line.find(field);
    REQUIRE(at != std::string::npos);
    CHECK(std::string(",}").find(line.at(at + field.size())) != std::string::npos);
  }
  r.bytes_in = 18446744073709551615ull;
  CHECK(format_audit(r).find(",\"bytes_in\":18446744073709551615,") != std::string::npos);
}

TEST_CASE("the audit client object names the peer as the listener learned it", "[audit]") {
  audit_client tls;
  tls.transport = "tls";
  tls.address = "127.0.0.1";
  tls.port = 50432;
  tls.subject = "O=dockgate,CN=ci-runner";
  CHECK(
      format_audit_client(tls) ==
      R"({"transport":"tls","address":"127.0.0.1","port":50432,"subject":"O=dockgate,CN=ci-runner"})");
  audit_client odd;
  odd.transport = "unix";
  odd.process = "a\"b\n";  // a process names itself: escaped like any value
  CHECK(format_audit_client(odd) == R"({"transport":"unix","process":"a\"b\n"})");
}

TEST_CASE("operations name the kind of object they act on", "[audit]") {
  CHECK(audit_object_type("ContainerStart") == "container");
  CHECK(audit_object_type("PutContainerArchive") == "container");
  CHECK(audit_object_type("ExecStart") == "exec");
  CHECK(audit_object_type("ImageCreate") == "image");
  CHECK(audit_object_type("NetworkInspect") == "network");
  CHECK(audit_object_type("VolumeDelete") == "volume");
  CHECK(audit_object_type("ContainerList").empty());
  CHECK(audit_object_type("ImagePrune").empty());
  CHECK(audit_object_type("SystemPing").empty());
  CHECK(audit_object_type("").empty());
}

TEST_CASE("an image reference's digest is known only where the reference pins one", "[audit]") {
  const std::string hex(64, 'a');
  CHECK(audit_image_digest("busybox@sha256:" + hex) == "sha256:" + hex);
  CHECK(audit_image_digest("127.0.0.1:5000/x/busybox:1.36@sha256:" + hex) == "sha256:" + hex);
  CHECK(audit_image_digest("busybox:1.36").empty());
  CHECK(audit_image_digest("127.0.0.1:5000/busybox").empty());
  CHECK(audit_image_digest("busybox@sha256:abc").empty());            // too short
  CHECK(audit_image_digest("busybox@:" + hex).empty());               // no algorithm
  CHECK(audit_image_digest("busybox@sha256:" + hex + "\"").empty());  // not the grammar
  CHECK(audit_image_digest("").empty());
}

TEST_CASE("audit times are RFC 3339 UTC with microseconds", "[audit]") {
  std::string out;
  append_rfc3339(out, std::chrono::system_clock::time_point{});
  CHECK(out == "1970-01-01T00:00:00.000000Z");
  out.clear();
  append_rfc3339(out, std::chrono::sys_days{std::chrono::year{2028} / 2 / 29} +
                          std::chrono::hours{23} + std::chrono::minutes{59} +
                          std::chrono::seconds{59} + std::chrono::microseconds{999999});
  CHECK(out == "2028-02-29T23:59:59.999999Z");
  // The date and time of a second are made once and kept: the next second, one before
  // it and one far off are each their own.
  using namespace std::chrono;
  const auto at = sys_days{year{2026} / 12 / 31} + hours{23} + minutes{59} + seconds{59};
  auto text = [](system_clock::time_point t) {
    std::string s;
    append_rfc3339(s, t);
    return s;
  };
  CHECK(text(at + microseconds{1}) == "2026-12-31T23:59:59.000001Z");
  CHECK(text(at + microseconds{999998}) == "2026-12-31T23:59:59.999998Z");
  CHECK(text(at + seconds{1}) == "2027-01-01T00:00:00.000000Z");
  CHECK(text(at - seconds{1}) == "2026-12-31T23:59:58.000000Z");
  CHECK(text(system_clock::time_point{} - seconds{1}) == "1969-12-31T23:59:59.000000Z");
  CHECK(text(at) == "2026-12-31T23:59:59.000000Z");
}

TEST_CASE("the audit schema accepts the gate's lines and refuses a broken one", "[audit]") {
  audit_client unix_peer;
  unix_peer.transport = "unix";
  unix_peer.uid = 1000;
  unix_peer.gid = 1000;
  unix_peer.pid = 4242;
  unix_peer.process = "dockerd-rootless";
  audit_client tls;
  tls.transport = "tls";
  tls.address = "::1";
  tls.port = 2376;
  tls.subject = "CN=x";
  const std::string unix_json = format_audit_client(unix_peer), tls_json = format_audit_client(tls);
  auto allowed = sample();
  allowed.client = unix_json;
  allowed.verdict = "allow";
  allowed.rule = allowed.reason = {};
  allowed.object_type = "container";
  allowed.object_name = "web";
  allowed.object_id =
      std::string_view("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef");
  const std::vector<dockgate::policy::body_change> forced{
      {"HostConfig.Privileged", "forced", std::string("true"), std::string("false")}};
  allowed.changes = forced;
  allowed.dropped = "query:x,body";
  allowed.status = 201;
  allowed.bytes_in = 300;
  allowed.bytes_out = 88;
  auto refused = sample();
  refused.client = tls_json;
  auto hijack = sample();
  hijack.client = unix_json;
  hijack.verdict = "allow";
  hijack.operation = "ContainerAttach";
  hijack.status = 101;
  hijack.hijacked = true;
  hijack.would = "dockgate: would refuse";
  const std::string good =
      format_audit(allowed) + "\n" + format_audit(refused) + "\n" + format_audit(hijack) + "\n";
  const auto [ok, ok_said] = check_lines(good);
  INFO(ok_said);
  CHECK(ok == 0);

  // One field broken at a time: each is named.
  const std::string line = format_audit(allowed);
  const std::pair<std::string, std::string> breaks[] = {
      {"\"time\":\"2026-12-01T20:14:11.000007Z\"", "\"time\":\"2026-12-01 20:14:11\""},
      {"\"transport\":\"unix\"", "\"transport\":\"udp\""},
      {"\"uid\":1000", "\"uid\":\"1000\""},
      {"\"verdict\":\"allow\"", "\"verdict\":\"maybe\""},
      {",\"status\":201", ""},
      {"\"profile\":\"cli\"", "\"profile\":\"cli\",\"extra\":1"},
      {"\"object\":{\"type\":\"container\"", "\"object\":{\"type\":\"box\""},
  };
  for (const auto& [from, to] : breaks) {
    std::string broken = line;
    const auto at = broken.find(from);
    REQUIRE(at != std::string::npos);
    broken.replace(at, from.size(), to);
    const auto [status, said] = check_lines(good + broken + "\n");
    INFO(broken);
    INFO(said);
    CHECK(status == 1);
    CHECK(said.find(":4: ") != std::string::npos);  // the broken line, and only it
    CHECK(said.find(":1: ") == std::string::npos);
  }
}

TEST_CASE("audit lines carry the changes as a JSON array, from only where the client set it",
          "[audit]") {
  const std::vector<dockgate::policy::body_change> changes{
      {"HostConfig.Memory", "clamped", "8589934592", "2147483648"},
      {"HostConfig.SecurityOpt", "forced", std::nullopt, R"(["no-new-privileges"])"},
      {"Labels", "owner stamped", std::nullopt, R"("<redacted>")"}};
  audit_record r;
  r.verdict = "allow";
  r.changes = changes;
  const auto line = format_audit(r);
  CHECK(
      line.find(
          R"(,"changes":[{"field":"HostConfig.Memory","action":"clamped","from":8589934592,"to":2147483648},)"
          R"({"field":"HostConfig.SecurityOpt","action":"forced","to":["no-new-privileges"]},)"
          R"({"field":"Labels","action":"owner stamped","to":"<redacted>"}],)") !=
      std::string::npos);
  audit_record none;
  CHECK(format_audit(none).find("changes") == std::string::npos);
}

// A sink that cannot write (the stdout sink's descriptor on /dev/full: every write ENOSPC,
// as on a full disk) shows on /metrics as down, with what waits for it in memory; past its
// queue's 16 MiB new lines are lost and counted; when it can write again (the descriptor
// now /dev/null) it is up and its queue empty.
TEST_CASE(
    "an audit sink that cannot write reports down with lines pending and lost until it writes "
    "again",
    "[audit][metrics]") {
  const int fd = ::open("/dev/full", O_WRONLY | O_CLOEXEC);
  REQUIRE(fd >= 0);
  auto logger = std::make_shared<spdlog::logger>("audit-test",
                                                 std::make_shared<spdlog::sinks::null_sink_mt>());
  std::vector<std::unique_ptr<audit_output>> outputs;
  outputs.push_back(open_fd_output(fd, "stdout"));
  audit_sink sink(std::move(outputs), false, *logger);
  auto r = sample();
  const std::string line = format_audit(r);

  auto health = [&] {
    const auto h = sink.health();
    REQUIRE(h.size() == 1);
    CHECK(h[0].sink == "stdout");
    return h[0];
  };
  CHECK(health().up);
  CHECK(sink.write(r));  // batch: queued
  CHECK(health().pending_lines == 1);
  CHECK(!sink.flush());  // ENOSPC
  auto h = health();
  CHECK(!h.up);
  CHECK(h.pending_lines == 1);
  CHECK(h.pending_bytes == line.size() + 1);
  CHECK(h.write_errors == 1);
  CHECK(h.lost_lines == 0);

  // Past 16 MiB queued: each new line is lost, and counted with its bytes.
  const std::size_t fit = (std::size_t{16} << 20) / (line.size() + 1) + 1;
  for (std::size_t i = 1; i < fit + 10; ++i) sink.write(r);  // fit + 10 in all
  h = health();
  CHECK(!h.up);
  CHECK(h.pending_lines == fit);
  CHECK(h.pending_bytes == fit * (line.size() + 1));
  CHECK(h.lost_lines == 10);
  CHECK(h.lost_bytes == 10 * (line.size() + 1));
  CHECK(h.write_errors > 1);

  metrics m;
  m.audit_sinks(sink.health());
  const std::string text = m.render();
  INFO(text);
  CHECK(text.find("dockgate_audit_sink_up{sink=\"stdout\"} 0\n") != std::string::npos);
  CHECK(text.find("dockgate_audit_sink_pending_lines{sink=\"stdout\"} " + std::to_string(fit) +
                  "\n") != std::string::npos);
  CHECK(text.find("dockgate_audit_sink_lost_lines_total{sink=\"stdout\"} 10\n") !=
        std::string::npos);

  // Room again: the queue is written, the sink is up, the loss stays counted.
  const int null = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  REQUIRE(null >= 0);
  REQUIRE(::dup2(null, fd) == fd);
  ::close(null);
  CHECK(sink.flush());
  h = health();
  CHECK(h.up);
  CHECK(h.pending_lines == 0);
  CHECK(h.pending_bytes == 0);
  CHECK(h.lost_lines == 10);
}
