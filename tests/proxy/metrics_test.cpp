#include "dockgate/proxy/metrics.hpp"

#include <catch2/catch.hpp>

using dockgate::proxy::metrics;

TEST_CASE("metrics render in Prometheus' text format", "[metrics]") {
  metrics m;
  m.record("docker-cli", "ContainerList", false, 200, "", 0.0007);
  m.record("docker-cli", "ContainerList", false, 200, "", 0.003);
  m.record("docker-cli", "VolumeCreate", true, 403, "operation", 0.0001);
  m.record("", "", true, 400, "route", 0.0001);
  m.record("docker-cli", "ContainerCreate", true, 403, "HostConfig.CapAdd:allow \"x\"", 0.002);
  m.upstream_error();
  m.stream(+1);
  m.hijack(+1);
  m.hijack(-1);
  const std::string text = m.render();
  INFO(text);
  CHECK(text.find("dockgate_requests_total{profile=\"docker-cli\",operation=\"ContainerList\","
                  "verdict=\"allow\",status=\"200\"} 2\n") != std::string::npos);
  CHECK(text.find("dockgate_requests_total{profile=\"none\",operation=\"unrouted\",verdict="
                  "\"deny\",status=\"400\"} 1\n") != std::string::npos);
  CHECK(text.find("dockgate_refusals_total{profile=\"docker-cli\",rule=\"operation\"} 1\n") !=
        std::string::npos);
  CHECK(text.find("dockgate_refusals_total{profile=\"docker-cli\",rule=\"HostConfig.CapAdd:allow "
                  "\\\"x\\\"\"} 1\n") != std::string::npos);  // escaped
  CHECK(text.find("dockgate_request_duration_seconds_bucket{le=\"0.001\"} 3\n") !=
        std::string::npos);
  CHECK(text.find("dockgate_request_duration_seconds_bucket{le=\"+Inf\"} 5\n") !=
        std::string::npos);
  CHECK(text.find("dockgate_request_duration_seconds_count 5\n") != std::string::npos);
  CHECK(text.find("dockgate_open_streams 1\n") != std::string::npos);
  CHECK(text.find("dockgate_open_hijacks 0\n") != std::string::npos);
  CHECK(text.find("dockgate_upstream_errors_total 1\n") != std::string::npos);
}

TEST_CASE("metrics say whether the last policy reload applied and whether the daemon answers",
          "[metrics]") {
  metrics m;
  m.connection_limit(10);
  m.policy_loaded(1700000000.5);
  std::string text = m.render();
  INFO(text);
  CHECK(text.find("dockgate_policy_reloads_total{result=\"success\"} 0\n") != std::string::npos);
  CHECK(text.find("dockgate_policy_reloads_total{result=\"failure\"} 0\n") != std::string::npos);
  CHECK(text.find("dockgate_policy_last_reload_successful 1\n") != std::string::npos);
  CHECK(text.find("dockgate_policy_last_reload_success_timestamp_seconds 1700000000.500\n") !=
        std::string::npos);
  CHECK(text.find("dockgate_daemon_up 0\n") != std::string::npos);  // not asked yet
  CHECK(text.find("dockgate_connection_limit 10\n") != std::string::npos);
  // A refused reload: counted, the gauge drops, the time stays that of the policy in force.
  m.policy_reload(false, 1700000100);
  m.daemon_up(true);
  text = m.render();
  CHECK(text.find("dockgate_policy_reloads_total{result=\"failure\"} 1\n") != std::string::npos);
  CHECK(text.find("dockgate_policy_last_reload_successful 0\n") != std::string::npos);
  CHECK(text.find("dockgate_policy_last_reload_success_timestamp_seconds 1700000000.500\n") !=
        std::string::npos);
  CHECK(text.find("dockgate_daemon_up 1\n") != std::string::npos);
  // An applied one: the gauge is back and the time moves.
  m.policy_reload(true, 1700000200);
  text = m.render();
  CHECK(text.find("dockgate_policy_reloads_total{result=\"success\"} 1\n") != std::string::npos);
  CHECK(text.find("dockgate_policy_reloads_total{result=\"failure\"} 1\n") != std::string::npos);
  CHECK(text.find("dockgate_policy_last_reload_successful 1\n") != std::string::npos);
  CHECK(text.find("dockgate_policy_last_reload_success_timestamp_seconds 1700000200.000\n") !=
        std::string::npos);
}

TEST_CASE("metrics of the gate's threads add up, the process's facts stay the first thread's",
          "[metrics]") {
  metrics first, second;
  first.connection_limit(10);
  first.daemon_up(true);
  first.record("docker-cli", "ContainerList", false, 200, "", 0.0007);
  first.connection(+2);
  second.connection_limit(99);  // not added: the process's, kept by the first thread
  second.record("docker-cli", "ContainerList", false, 200, "", 0.003);
  second.record("docker-cli", "VolumeCreate", true, 403, "operation", 0.0001);
  second.record("ci", "SystemPing", false, 200, "", 0.0001);
  second.upstream_error();
  second.stream(+1);
  second.hijack(+1);
  second.connection(+3);
  first.add(second);
  const std::string text = first.render();
  INFO(text);
  CHECK(text.find("dockgate_requests_total{profile=\"docker-cli\",operation=\"ContainerList\","
                  "verdict=\"allow\",status=\"200\"} 2\n") != std::string::npos);
  CHECK(text.find("dockgate_requests_total{profile=\"docker-cli\",operation=\"VolumeCreate\","
                  "verdict=\"deny\",status=\"403\"} 1\n") != std::string::npos);
  CHECK(text.find("dockgate_requests_total{profile=\"ci\",operation=\"SystemPing\",verdict="
                  "\"allow\",status=\"200\"} 1\n") != std::string::npos);
  CHECK(text.find("dockgate_refusals_total{profile=\"docker-cli\",rule=\"operation\"} 1\n") !=
        std::string::npos);
  CHECK(text.find("dockgate_request_duration_seconds_bucket{le=\"0.001\"} 3\n") !=
        std::string::npos);
  CHECK(text.find("dockgate_request_duration_seconds_count 4\n") != std::string::npos);
  CHECK(text.find("dockgate_request_duration_seconds_sum 0.003900\n") != std::string::npos);
  CHECK(text.find("dockgate_connections 5\n") != std::string::npos);
  CHECK(text.find("dockgate_open_streams 1\n") != std::string::npos);
  CHECK(text.find("dockgate_open_hijacks 1\n") != std::string::npos);
  CHECK(text.find("dockgate_upstream_errors_total 1\n") != std::string::npos);
  CHECK(text.find("dockgate_connection_limit 10\n") != std::string::npos);
  CHECK(text.find("dockgate_daemon_up 1\n") != std::string::npos);
}

TEST_CASE("metrics show each audit sink's health with what waits in memory and what was lost",
          "[metrics][audit]") {
  metrics m;
  std::string text = m.render();
  // Declared with no sink (the dashboard's and the rules' names are always there).
  CHECK(text.find("# TYPE dockgate_audit_sink_up gauge\n") != std::string::npos);
  CHECK(text.find("# TYPE dockgate_audit_sink_lost_lines_total counter\n") != std::string::npos);
  m.audit_sinks({{"file:/var/log/dockgate/audit.log", false, 4096, 10, 3, 900, 7},
                 {"syslog:udp://\"x\":514", true, 0, 0, 0, 0, 0}});
  metrics other;  // another thread's: the sinks are the process's, never summed
  other.audit_sinks({{"stdout", false, 1, 1, 1, 1, 1}});
  m.add(other);
  text = m.render();
  INFO(text);
  const std::string f = "{sink=\"file:/var/log/dockgate/audit.log\"} ";
  CHECK(text.find("dockgate_audit_sink_up" + f + "0\n") != std::string::npos);
  CHECK(text.find("dockgate_audit_sink_pending_bytes" + f + "4096\n") != std::string::npos);
  CHECK(text.find("dockgate_audit_sink_pending_lines" + f + "10\n") != std::string::npos);
  CHECK(text.find("dockgate_audit_sink_lost_lines_total" + f + "3\n") != std::string::npos);
  CHECK(text.find("dockgate_audit_sink_lost_bytes_total" + f + "900\n") != std::string::npos);
  CHECK(text.find("dockgate_audit_sink_write_errors_total" + f + "7\n") != std::string::npos);
  CHECK(text.find("dockgate_audit_sink_up{sink=\"syslog:udp://\\\"x\\\":514\"} 1\n") !=
        std::string::npos);  // escaped
  CHECK(text.find("sink=\"stdout\"") == std::string::npos);
}
