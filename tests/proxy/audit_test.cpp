#include <catch2/catch.hpp>

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
