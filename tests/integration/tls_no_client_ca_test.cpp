// A tls:// listener without --tls-client-ca (proxy/src/tls_front.cpp): no client is ever
// identified by a certificate. The gate asks for none, and one a client presents anyway
// never becomes a subject: a tls_subject rule does not match, the default profile applies.
// Judged by what the client gets and the audit log's client and profile.
#include <catch2/catch.hpp>

#include "harness.hpp"

using namespace dockgate::test;

TEST_CASE("without --tls-client-ca a client certificate selects no profile", "[integration][tls]") {
  const std::string pki = make_pki();
  const std::string port = free_tcp_port();
  proxy_process proxy(R"({"clients":[{"tls_subject":"O=dockgate,CN=ci-runner","profile":"ci"}],
      "default_profile":"ping-only",
      "profiles":{"ci":{"allow":["SystemPing","SystemPingHead","SystemVersion"]},
                  "ping-only":{"allow":["SystemPing","SystemPingHead"]}}})",
                      {"--listen", "tls://127.0.0.1:" + port, "--tls-cert", pki + "/server.pem",
                       "--tls-key", pki + "/server.key"});
  const std::string tls_cli = docker_cli() + " --tlsverify --tlscacert " + pki +
                              "/ca.pem --tlscert " + pki + "/client.pem --tlskey " + pki +
                              "/client.key -H tcp://127.0.0.1:" + port;
  auto version = run(tls_cli + " version --format '{{.Server.APIVersion}}'");
  INFO(version.output);
  CHECK(version.output.find("dockgate: SystemVersion is not allowed by profile ping-only") !=
        std::string::npos);
  CHECK(proxy.audit_contains("\"operation\":\"SystemVersion\""));
  const std::string log = proxy.audit_log();
  INFO(log);
  CHECK(log.find("\"client\":\"tls:127.0.0.1:") != std::string::npos);
  CHECK(log.find("subject=") == std::string::npos);
  CHECK(log.find("\"profile\":\"ci\"") == std::string::npos);
  CHECK(log.find("\"profile\":\"ping-only\"") != std::string::npos);
  // The connection itself works: the default profile's own operation is answered.
  auto ping = run("curl -s --cacert " + pki + "/ca.pem --cert " + pki + "/client.pem --key " + pki +
                  "/client.key https://127.0.0.1:" + port + "/_ping");
  CHECK(ping.output == "OK");
  run("rm -rf " + pki);
}
