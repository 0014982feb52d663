// tls:// listeners: TLS terminated by the proxy, client certificates verified against
// --tls-client-ca, their subject selecting the profile. The docker CLI is the client.
#include <catch2/catch.hpp>

#include "harness.hpp"

using namespace dockgate::test;


TEST_CASE("a TLS client certificate's subject selects the profile", "[integration][tls]") {
  const std::string pki = make_pki();
  const std::string port = free_tcp_port();
  proxy_process proxy(R"({"clients":[{"tls_subject":"O=dockgate,CN=ci-runner","profile":"ci"}],
      "default_profile":"ping-only",
      "profiles":{"ci":{"allow":["SystemPing","SystemPingHead","SystemVersion"]},
                  "ping-only":{"allow":["SystemPing","SystemPingHead"]}}})",
                      {"--listen", "tls://127.0.0.1:" + port, "--tls-cert", pki + "/server.pem", "--tls-key",
                       pki + "/server.key", "--tls-client-ca", pki + "/ca.pem"});
  const std::string tls_cli = docker_cli() + " --tlsverify --tlscacert " + pki + "/ca.pem --tlscert " + pki +
                              "/client.pem --tlskey " + pki + "/client.key -H tcp://127.0.0.1:" + port;
  auto version = run(tls_cli + " version --format '{{.Server.APIVersion}}'");
  INFO(version.output);
  CHECK(version.output == "1.41\n");
  CHECK(proxy.audit_contains("\"client\":\"tls:127.0.0.1:"));
  CHECK(proxy.audit_contains(",subject=O=dockgate,CN=ci-runner\",\"profile\":\"ci\""));

  // Without a client certificate the handshake fails: nothing reaches the daemon.
  auto anonymous = run(docker_cli() + " --tlsverify --tlscacert " + pki + "/ca.pem -H tcp://127.0.0.1:" + port +
                       " version --format '{{.Server.APIVersion}}'");
  CHECK(anonymous.status != 0);
  CHECK(anonymous.output.find("1.41") == std::string::npos);
  // Over the unix listener (no certificate) the default profile applies.
  auto plain = run(proxy.docker() + " version");
  CHECK(plain.output.find("dockgate: SystemVersion is not allowed by profile ping-only") != std::string::npos);
  run("rm -rf " + pki);
}
