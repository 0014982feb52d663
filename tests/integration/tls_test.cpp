// tls:// listeners: TLS terminated by the proxy, client certificates verified against
// --tls-client-ca, their subject selecting the profile. The docker CLI is the client.
#include <catch2/catch.hpp>
#include <thread>

#include "dockgate/client/http_client.hpp"
#include "harness.hpp"

using namespace dockgate::test;

namespace {

// A client whose certificate's subject names the profile `ci`; everyone else `ping-only`.
constexpr const char* subject_policy =
    R"({"clients":[{"tls_subject":"O=dockgate,CN=ci-runner","profile":"ci"}],
      "default_profile":"ping-only",
      "profiles":{"ci":{"allow":["SystemPing","SystemPingHead","SystemVersion"]},
                  "ping-only":{"allow":["SystemPing","SystemPingHead"]}}})";

// The docker CLI with the client certificate of make_pki(), to tls://127.0.0.1:<port>.
std::string tls_cli(const std::string& pki, const std::string& port) {
  return docker_cli() + " --tlsverify --tlscacert " + pki + "/ca.pem --tlscert " + pki +
         "/client.pem --tlskey " + pki + "/client.key -H tcp://127.0.0.1:" + port;
}

}  // namespace

TEST_CASE("a TLS client certificate's subject selects the profile", "[integration][tls]") {
  const std::string pki = make_pki();
  const std::string port = free_tcp_port();
  proxy_process proxy(subject_policy,
                      {"--listen", "tls://127.0.0.1:" + port, "--tls-cert", pki + "/server.pem",
                       "--tls-key", pki + "/server.key", "--tls-client-ca", pki + "/ca.pem"});
  auto version = run(tls_cli(pki, port) + " version --format '{{.Server.APIVersion}}'");
  INFO(version.output);
  CHECK(version.output == "1.41\n");
  CHECK(proxy.audit_contains(
      "\"client\":{\"transport\":\"tls\",\"address\":\"127.0.0.1\",\"port\":"));
  CHECK(proxy.audit_contains("\"subject\":\"O=dockgate,CN=ci-runner\"},\"profile\":\"ci\""));

  // Without a client certificate the handshake fails: nothing reaches the daemon.
  auto anonymous =
      run(docker_cli() + " --tlsverify --tlscacert " + pki + "/ca.pem -H tcp://127.0.0.1:" + port +
          " version --format '{{.Server.APIVersion}}'");
  CHECK(anonymous.status != 0);
  CHECK(anonymous.output.find("1.41") == std::string::npos);
  // Over the unix listener (no certificate) the default profile applies.
  auto plain = run(proxy.docker() + " version");
  CHECK(plain.output.find("dockgate: SystemVersion is not allowed by profile ping-only") !=
        std::string::npos);
  run("rm -rf " + pki);
}

// Without --tls-client-ca (proxy/src/tls_front.cpp) no client is ever identified by a
// certificate: the gate asks for none, and one a client presents anyway never becomes a
// subject (a tls_subject rule does not match, the default profile applies). Judged by what
// the client gets and the audit log's client and profile.
TEST_CASE("without --tls-client-ca a client certificate selects no profile", "[integration][tls]") {
  const std::string pki = make_pki();
  const std::string port = free_tcp_port();
  proxy_process proxy(subject_policy, {"--listen", "tls://127.0.0.1:" + port, "--tls-cert",
                                       pki + "/server.pem", "--tls-key", pki + "/server.key"});
  auto version = run(tls_cli(pki, port) + " version --format '{{.Server.APIVersion}}'");
  INFO(version.output);
  CHECK(version.output.find("dockgate: SystemVersion is not allowed by profile ping-only") !=
        std::string::npos);
  CHECK(proxy.audit_contains("\"operation\":\"SystemVersion\""));
  const std::string log = proxy.audit_log();
  INFO(log);
  CHECK(log.find("\"client\":{\"transport\":\"tls\",\"address\":\"127.0.0.1\",\"port\":") !=
        std::string::npos);
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
  proxy_process proxy(
      subject_policy,
      {"--listen", "tls://127.0.0.1:" + port, "--tls-cert", pki + "/server.pem", "--tls-key",
       pki + "/server.key", "--shutdown-timeout", "1", "--head-timeout", "60", "--threads", "2"});
  // Two silent clients: one on each thread.
  background silent(
      "exec python3 -c \"import socket,time\n"
      "a=[socket.create_connection(('127.0.0.1'," +
      port +
      ")) for _ in range(2)]\n"
      "print('connected',flush=True)\ntime.sleep(120)\"");
  REQUIRE(silent.read_line(std::chrono::seconds(10)).value_or("") == "connected");
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // accepted, handshaking
  const auto [status, took] = proxy.terminate();
  CHECK(status == 0);
  CHECK(took < std::chrono::seconds(8));  // the deadline is 1 s; the head timeout 60 s
}

// Go's crypto/x509 (the docker CLI, dockerd) reads a server's name only from the
// certificate's subjectAltName; OpenSSL, unless told otherwise, falls back to the subject's
// CN when there are no DNS names. Both of dockgate's TLS clients must refuse what Docker's
// refuse: the gate's tls:// upstream (proxy/src/upstream_tls.cpp) and the client library
// the sidecar reaches a tls:// gate with (client/src/http_client.cpp). The server is a
// gate's TLS listener in front of the test engine with a certificate for "localhost" from
// the test CA: CN only, or the same name as a DNS subjectAltName (the control, which all
// accept). Judged by the docker CLI's answer (the reference) and the engine's record: a
// create through a refusing client never happens.
TEST_CASE("a server certificate naming its host only in the subject CN is refused as Go refuses it",
          "[integration][tls][upstream]") {
  const std::string pki = make_pki();
  REQUIRE(run("(cd " + pki +
              " && printf 'subjectAltName=DNS:localhost\\n' > san.ext && "
              "openssl req -newkey rsa:2048 -nodes -keyout localhost.key -out localhost.csr -subj "
              "/CN=localhost && "
              "openssl x509 -req -in localhost.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out "
              "cn-only.pem -days 1 && "
              "openssl x509 -req -in localhost.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out "
              "san.pem -days 1 -extfile san.ext) >/dev/null 2>&1")
              .status == 0);
  // The case's premise: the first names localhost only in its subject.
  REQUIRE(run("openssl x509 -in " + pki + "/cn-only.pem -noout -ext subjectAltName")
              .output.find("DNS:") == std::string::npos);
  const std::string direct = docker_cli() + " -H " + engine_host();
  const std::string front_policy =
      R"({"default_profile":"p","profiles":{"p":{"confine_to_owned":false,"allow":["SystemPing","SystemVersion","ContainerCreate"],"images":{"allow":["*"]}}}})";
  for (const bool cn_only : {true, false}) {
    SECTION(cn_only ? "subject CN only: refused" : "subjectAltName DNS: accepted") {
      const std::string port = free_tcp_port();
      const std::string cert = pki + (cn_only ? "/cn-only.pem" : "/san.pem");
      proxy_process front(front_policy, {"--listen", "tls://127.0.0.1:" + port, "--tls-cert", cert,
                                         "--tls-key", pki + "/localhost.key"});
      // The reference: the docker CLI (Go) to https://localhost:<port>.
      auto cli = run(docker_cli() + " --tlsverify --tlscacert " + pki + "/ca.pem --tlscert " + pki +
                     "/client.pem --tlskey " + pki + "/client.key -H tcp://localhost:" + port +
                     " version --format '{{.Server.APIVersion}}'");
      INFO("docker CLI: " << cli.output);
      CHECK((cli.status == 0) == !cn_only);
      if (cn_only)
        CHECK(cli.output.find("x509: certificate relies on legacy Common Name field") !=
              std::string::npos);

      // The gate's tls:// upstream.
      {
        proxy_process gate(front_policy,
                           {"--upstream-tlscacert", pki + "/ca.pem", "--upstream-tlscert",
                            pki + "/client.pem", "--upstream-tlskey", pki + "/client.key"},
                           {}, "tls://localhost:" + port);
        const std::string name = unique_name("cn-upstream");
        auto create =
            run(gate.docker() + " create --name " + name + " --network none " + test_image());
        INFO("create through the gate: " << create.output);
        CHECK((create.status == 0) == !cn_only);
        CHECK(container_exists(name) == !cn_only);
        if (cn_only) {
          auto log = run("cat " + gate.dir() + "/proxy.err").output;
          INFO(log);
          CHECK(log.find("upstream connect failed: TLS handshake") != std::string::npos);
          CHECK(log.find("hostname mismatch") != std::string::npos);
        }
        run(direct + " rm -f " + name);
      }

      // The client library, as the sidecar uses it for DOCKER_HOST=tcp://localhost:<port>
      // with DOCKER_TLS_VERIFY (client/src/engine.cpp).
      {
        std::string error;
        auto tls = dockgate::client::tls_context::create(pki + "/ca.pem", pki + "/client.pem",
                                                         pki + "/client.key", &error);
        REQUIRE(tls);
        dockgate::client::transport where{{dockgate::common::endpoint::kind::tcp, "", "localhost",
                                           static_cast<std::uint16_t>(std::stoi(port))},
                                          tls};
        const std::string name = unique_name("cn-client");
        auto created = dockgate::client::http_request(
            where, "POST", "/v1.41/containers/create?name=" + name,
            "{\"Image\":\"" + test_image() + "\",\"HostConfig\":{\"NetworkMode\":\"none\"}}",
            std::chrono::seconds(20));
        INFO("create through the client library: " << created.status << " " << created.error
                                                   << created.body);
        CHECK((created.status == 201) == !cn_only);
        CHECK(container_exists(name) == !cn_only);
        if (cn_only) CHECK(created.error.find("hostname mismatch") != std::string::npos);
        run(direct + " rm -f " + name);
      }
    }
  }
  run("rm -rf " + pki);
}
