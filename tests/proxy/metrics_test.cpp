#include <catch2/catch.hpp>

#include "dockgate/proxy/metrics.hpp"

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
  CHECK(text.find("dockgate_requests_total{profile=\"docker-cli\",operation=\"ContainerList\",verdict=\"allow\",status=\"200\"} 2\n") != std::string::npos);
  CHECK(text.find("dockgate_requests_total{profile=\"none\",operation=\"unrouted\",verdict=\"deny\",status=\"400\"} 1\n") != std::string::npos);
  CHECK(text.find("dockgate_refusals_total{profile=\"docker-cli\",rule=\"operation\"} 1\n") != std::string::npos);
  CHECK(text.find("dockgate_refusals_total{profile=\"docker-cli\",rule=\"HostConfig.CapAdd:allow \\\"x\\\"\"} 1\n") != std::string::npos);  // escaped
  CHECK(text.find("dockgate_request_duration_seconds_bucket{le=\"0.001\"} 3\n") != std::string::npos);
  CHECK(text.find("dockgate_request_duration_seconds_bucket{le=\"+Inf\"} 5\n") != std::string::npos);
  CHECK(text.find("dockgate_request_duration_seconds_count 5\n") != std::string::npos);
  CHECK(text.find("dockgate_open_streams 1\n") != std::string::npos);
  CHECK(text.find("dockgate_open_hijacks 0\n") != std::string::npos);
  CHECK(text.find("dockgate_upstream_errors_total 1\n") != std::string::npos);
}
