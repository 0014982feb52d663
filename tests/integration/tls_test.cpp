// tls:// listeners: TLS terminated by the proxy, client certificates verified against
// --tls-client-ca, their subject selecting the profile. The docker CLI is the client.
#include <catch2/catch.hpp>
#include <thread>

#include "harness.hpp"

using namespace dockgate::test;

namespace {

// A client whose certificate's subject names the profile `ci`; everyone else `ping-only`.
constexpr const char* subject_policy = R"({"clients":[{"tls_subject":"O=dockgate,CN=ci-runner","profile":"ci"}],
      "default_profile":"ping-only",
      "profiles":{"ci":{"allow":["SystemPing","SystemPingHead","SystemVersion"]},
                  "ping-only":{"allow":["SystemPing","SystemPingHead"]}}})";

// The docker CLI with the client certificate of make_pki(), to tls://127.0.0.1:<port>.
std::string tls_cli(const std::string& pki, const std::string& port) {
  return docker_cli() + " --tlsverify --tlscacert " + pki + "/ca.pem --tlscert " + pki + "/client.pem --tlskey " +
         pki + "/client.key -H tcp://127.0.0.1:" + port;
}

}  // namespace

TEST_CASE("a TLS client certificate's subject selects the profile", "[integration][tls]") {
  const std::string pki = make_pki();
  const std::string port = free_tcp_port();
  proxy_process proxy(subject_policy,
                      {"--listen", "tls://127.0.0.1:" + port, "--tls-cert", pki + "/server.pem", "--tls-key",
                       pki + "/server.key", "--tls-client-ca", pki + "/ca.pem"});
  auto version = run(tls_cli(pki, port) + " version --format '{{.Server.APIVersion}}'");
  INFO(version.output);
  CHECK(version.output == "1.41\n");
  CHECK(proxy.audit_contains("\"client\":{\"transport\":\"tls\",\"address\":\"127.0.0.1\",\"port\":"));
  CHECK(proxy.audit_contains("\"subject\":\"O=dockgate,CN=ci-runner\"},\"profile\":\"ci\""));

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

// Without --tls-client-ca (proxy/src/tls_front.cpp) no client is ever identified by a
// certificate: the gate asks for none, and one a client presents anyway never becomes a
// subject (a tls_subject rule does not match, the default profile applies). Judged by what
// the client gets and the audit log's client and profile.
TEST_CASE("without --tls-client-ca a client certificate selects no profile", "[integration][tls]") {
  const std::string pki = make_pki();
  const std::string port = free_tcp_port();
  proxy_process proxy(subject_policy,
                      {"--listen", "tls://127.0.0.1:" + port, "--tls-cert", pki + "/server.pem",
                       "--tls-key", pki + "/server.key"});
  auto version = run(tls_cli(pki, port) + " version --format '{{.Server.APIVersion}}'");
  INFO(version.output);
  CHECK(version.output.find("dockgate: SystemVersion is not allowed by profile ping-only") !=
        std::string::npos);
  CHECK(proxy.audit_contains("\"operation\":\"SystemVersion\""));
  const std::string log = proxy.audit_log();
  INFO(log);
  CHECK(log.find("\"client\":{\"transport\":\"tls\",\"address\":\"127.0.0.1\",\"port\":") != std::string::npos);
  CHECK(log.find("\"subject\"") == std::string::npos);
  CHECK(log.find("\"profile\":\"ci\"") == std::string::npos);
  CHECK(log.find("\"profile\":\"ping-only\"") != std::string::npos);
  // The connection itself works: the default profile's own operation is answered.
  auto ping = run("curl -s --cacert " + pki + "/ca.pem --cert " + pki + "/client.pem --key " + pki +
                  "/client.key https://127.0.0.1:" + port + "/_ping");
  CHECK(ping.output == "OK");
  run("rm -rf " + pki);
}

// The gate reads only files root controls (issue 18): a key another user owns, or could
// read-modify as its group or others, is refused at start, naming the flag and the file.
TEST_CASE("a TLS key, certificate or CA a user could change is refused at start",
          "[integration][tls][trust]") {
  const std::string pki = make_pki();
  const std::string port = free_tcp_port();
  const std::string policy = R"({"default_profile":"p","profiles":{"p":{"allow":["SystemPing"]}}})";
  auto start = [&] {
    proxy_process proxy(policy,
                        {"--listen", "tls://127.0.0.1:" + port, "--tls-cert", pki + "/server.pem",
                         "--tls-key", pki + "/server.key", "--tls-client-ca", pki + "/ca.pem"});
  };
  CHECK_NOTHROW(start());  // as made: root's
  REQUIRE(
      run("chown 1000:1000 " + pki + "/server.key && chmod 0644 " + pki + "/server.key").status ==
      0);
  CHECK_THROWS_WITH(start(), Catch::Contains("--tls-key: refused: \"" + pki +
                                             "/server.key\" is owned by uid 1000, not root"));
  REQUIRE(run("chown 0:0 " + pki + "/server.key && chmod 0600 " + pki + "/server.key").status == 0);
  REQUIRE(run("chmod 0664 " + pki + "/server.pem").status == 0);
  CHECK_THROWS_WITH(start(), Catch::Contains("--tls-cert: refused: \"" + pki +
                                             "/server.pem\" is writable by group or others"));
  REQUIRE(run("chmod 0644 " + pki + "/server.pem && chown 1000 " + pki).status == 0);
  CHECK_THROWS_WITH(start(),
                    Catch::Contains("--tls-cert: refused:"));  // the directory is the user's
  REQUIRE(run("chown 0 " + pki + " && mkdir -m 0755 " + pki + "/user && chown 1000 " + pki +
              "/user && cp " + pki + "/ca.pem " + pki + "/user/ca.pem && ln -sf user/ca.pem " +
              pki + "/ca.pem")
              .status == 0);
  CHECK_THROWS_WITH(
      start(),
      Catch::Contains("--tls-client-ca: refused:"));  // through a symlink into the user's directory
  run("rm -rf " + pki);
}

// A TLS client that connects and never says hello holds a connection slot; at SIGTERM it is
// closed at the shutdown deadline like any connection (server.cpp, shutdown_when_signalled),
// not waited for until its head timeout.
TEST_CASE("a TLS client stuck in its handshake does not hold SIGTERM past the deadline",
          "[integration][tls][shutdown]") {
  const std::string pki = make_pki();
  const std::string port = free_tcp_port();
  proxy_process proxy(subject_policy,
                      {"--listen", "tls://127.0.0.1:" + port, "--tls-cert", pki + "/server.pem",
                       "--tls-key", pki + "/server.key", "--shutdown-timeout", "1",
                       "--head-timeout", "60", "--threads", "2"});
  // Two silent clients: one on each thread.
  background silent("exec python3 -c \"import socket,time\n"
                    "a=[socket.create_connection(('127.0.0.1'," + port + ")) for _ in range(2)]\n"
                    "print('connected',flush=True)\ntime.sleep(120)\"");
  REQUIRE(silent.read_line(std::chrono::seconds(10)).value_or("") == "connected");
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // accepted, handshaking
  const auto [status, took] = proxy.terminate();
  CHECK(status == 0);
  CHECK(took < std::chrono::seconds(8));  // the deadline is 1 s; the head timeout 60 s
}
