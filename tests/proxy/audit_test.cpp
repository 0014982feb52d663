#include <catch2/catch.hpp>

#include <vector>

#include "dockgate/proxy/audit.hpp"

using namespace dockgate::proxy;

TEST_CASE("audit lines are one JSON object", "[audit]") {
  audit_record r;
  r.client = "unix:uid=0,gid=0,pid=1";
  r.profile = "cli";
  r.method = "POST";
  r.path = "/v1.41/containers/create";
  r.operation = "ContainerCreate";
  r.verdict = "deny";
  r.rule = "operation";
  r.reason = "dockgate: \"x\"";
  r.status = 403;
  r.duration_ms = 1.5;
  CHECK(format_audit(r) ==
        R"({"client":"unix:uid=0,gid=0,pid=1","profile":"cli","method":"POST","path":"/v1.41/containers/create","operation":"ContainerCreate","verdict":"deny","rule":"operation","reason":"dockgate: \"x\"","status":403,"bytes_in":0,"bytes_out":0,"duration_ms":1.500})");
}

TEST_CASE("audit lines carry the changes as a JSON array, from only where the client set it", "[audit]") {
  const std::vector<dockgate::policy::body_change> changes{
      {"HostConfig.Memory", "clamped", "8589934592", "2147483648"},
      {"HostConfig.SecurityOpt", "forced", std::nullopt, R"(["no-new-privileges"])"},
      {"Labels", "owner stamped", std::nullopt, R"("<redacted>")"}};
  audit_record r;
  r.verdict = "allow";
  r.changes = changes;
  const auto line = format_audit(r);
  CHECK(line.find(R"(,"changes":[{"field":"HostConfig.Memory","action":"clamped","from":8589934592,"to":2147483648},)"
                  R"({"field":"HostConfig.SecurityOpt","action":"forced","to":["no-new-privileges"]},)"
                  R"({"field":"Labels","action":"owner stamped","to":"<redacted>"}],)") != std::string::npos);
  audit_record none;
  CHECK(format_audit(none).find("changes") == std::string::npos);
}
