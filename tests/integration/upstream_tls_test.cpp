// --upstream tls://host:port (proxy/src/upstream_tls.cpp): the gate in front of a remote
// engine as production hosts expose it, a second, private dockerd started here with
// --tlsverify and certificates made with openssl (make_pki), sharing nothing with the
// test engine (its own data root, exec root, pidfile; no bridge). The docker CLI is the
// client; the TLS engine's own record (inspect, its established connections) is the judge.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <thread>

#include "harness.hpp"

using namespace dockgate::test;

namespace {

// dockerd --tlsverify on 127.0.0.1:<port> and 127.0.0.2:<port>, its certificate for
// 127.0.0.1 only (so 127.0.0.2 is the same daemon under a name its certificate lacks).
// Started once for this binary, stopped at exit.
class tls_engine {
 public:
  tls_engine() : pki_(make_pki()), port_(free_tcp_port()) {
    const std::string d = pki_ + "/engine";
    run("mkdir -p " + d);
    pid_ = ::fork();
    if (pid_ == 0) {
      ::setsid();
      const std::string cmd = "exec dockerd --data-root " + d + "/data --exec-root " + d +
                              "/exec --pidfile " + d + "/dockerd.pid -H tcp://127.0.0.1:" + port_ +
                              " -H tcp://127.0.0.2:" + port_ + " --tlsverify --tlscacert " + pki_ +
                              "/ca.pem --tlscert " + pki_ + "/server.pem --tlskey " + pki_ +
                              "/server.key --bridge none --iptables=false --ip-masq=false >" + d +
                              "/dockerd.log 2>&1";
      ::execl("/bin/sh", "sh", "-c", cmd.c_str(), nullptr);
      ::_exit(127);
    }
    for (int i = 0; i < 300 && run(cli() + " version").status != 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    // The test image, from the test engine (the TLS engine has no registry or network).
    auto load = run(docker_cli() + " -H " + engine_host() + " save " + test_image() + " | " +
                    cli() + " load");
    if (load.status != 0) throw std::runtime_error("loading the test image: " + load.output);
  }
  ~tls_engine() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      int status = 0;
      ::waitpid(pid_, &status, 0);
    }
    run("grep -o ' " + pki_ +
        "/engine/[^ ]*' /proc/mounts | sort -r | xargs -r umount -l; rm -rf " + pki_);
  }
  tls_engine(const tls_engine&) = delete;
  tls_engine& operator=(const tls_engine&) = delete;

  // The docker CLI straight to the engine, with the client certificate.
  std::string cli() const {
    return docker_cli() + " --tlsverify --tlscacert " + pki_ + "/ca.pem --tlscert " + pki_ +
           "/cert.pem --tlskey " + pki_ + "/key.pem -H tcp://127.0.0.1:" + port_;
  }
  const std::string& pki() const { return pki_; }
  const std::string& port() const { return port_; }
  // The gate's established TCP connections to this engine.
  int connections_from(pid_t gate) const {
    auto r = run("ss -Htnp state established '( dport = :" + port_ +
                 " )' | grep -c 'pid=" + std::to_string(gate) + ",'");
    return std::atoi(r.output.c_str());
  }

 private:
  std::string pki_;
  std::string port_;
  pid_t pid_ = -1;
};

tls_engine& engine() {
  static tls_engine e;
  return e;
}

}  // namespace

TEST_CASE("a tls:// upstream: the docker CLI through the gate to a dockerd --tlsverify",
          "[integration][tls][upstream]") {
  tls_engine& e = engine();
  // DOCKER_CERT_PATH's layout: ca.pem, cert.pem, key.pem.
  proxy_process proxy("compose/policies/docker-cli.json", {"--upstream-cert-path", e.pki()}, {},
                      "tls://127.0.0.1:" + e.port());
  auto version = run(proxy.docker() + " version --format '{{.Server.APIVersion}}'");
  INFO(version.output);
  REQUIRE(version.status == 0);
  CHECK(run(proxy.docker() + " ps").status == 0);

  // A hijacked stream: stdin goes to the container, its EOF too (cat ends), output back.
  const std::string name = unique_name("utls-i");
  auto piped = run("printf 'through tls\\n' | " + proxy.docker() + " run -i --name " + name +
                   " --network none " + test_image() + " cat");
  INFO(piped.output);
  CHECK(piped.output == "through tls\n");
  // The daemon's record: the container ran on the TLS engine, with the profile's hardening.
  auto record =
      run(e.cli() + " inspect --format '{{.State.ExitCode}} {{.HostConfig.SecurityOpt}}' " + name);
  INFO(record.output);
  CHECK(record.output.starts_with("0 "));
  CHECK(record.output.find("no-new-privileges") != std::string::npos);

  // Streams: logs -f follows a container until it ends; events within a window.
  const std::string since = std::to_string(::time(nullptr) - 1);
  const std::string talker = unique_name("utls-logs");
  REQUIRE(run(proxy.docker() + " run -d --name " + talker + " --network none " + test_image() +
              " sh -c 'for i in 1 2 3; do echo line$i; sleep 0.3; done'")
              .status == 0);
  auto logs = run(proxy.docker() + " logs -f " + talker);
  CHECK(logs.output == "line1\nline2\nline3\n");
  auto events = run(proxy.docker() + " events --since " + since + " --until " +
                    std::to_string(::time(nullptr) + 1) + " --filter container=" + talker +
                    " --format '{{.Action}}'");
  INFO(events.output);
  CHECK(events.output.find("start\n") != std::string::npos);
  CHECK(events.output.find("die\n") != std::string::npos);

  // Keep-alive: three requests on one client connection (with the gate's own lookups)
  // use one TLS connection to the daemon, still open after them.
  auto keep =
      run("python3 -c '\n"
          "import socket,sys,time\n"
          "s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])\n"
          "f=s.makefile(\"rb\")\n"
          "for t in (\"/_ping\",\"/v1.41/containers/json\",\"/v1.41/containers/" +
          talker +
          "/json\"):\n"
          "  s.sendall((\"GET %s HTTP/1.1\\r\\nHost: d\\r\\n\\r\\n\" % t).encode())\n"
          "  st=f.readline(); n=0\n"
          "  while True:\n"
          "    h=f.readline()\n"
          "    if h in (b\"\\r\\n\",b\"\"): break\n"
          "    if h.lower().startswith(b\"content-length:\"): n=int(h.split(b\":\")[1])\n"
          "    if h.lower().startswith(b\"transfer-encoding:\"): n=-1\n"
          "  if n>0: f.read(n)\n"
          "  while n<0:\n"
          "    z=int(f.readline(),16); f.read(z+2)\n"
          "    if z==0: break\n"
          "  print(st.split()[1].decode())\n"
          "sys.stdout.flush(); open(sys.argv[2],\"w\").close(); time.sleep(3)\n"
          "' " +
          proxy.socket_path() + " " + proxy.dir() +
          "/served & "
          "for i in $(seq 100); do [ -e " +
          proxy.dir() +
          "/served ] && break; sleep 0.1; done; "
          "ss -Htnp state established '( dport = :" +
          e.port() + " )' | grep -c 'pid=" + std::to_string(proxy.pid()) + ",'; wait");
  INFO(keep.output);
  CHECK(keep.output == "200\n200\n200\n1\n");

  run(e.cli() + " rm -f " + name + " " + talker);
}

// The daemon must prove who it is (upstream_tls.cpp): a certificate that does not name
// the host of --upstream, or that chains to a CA the gate was not given, ends the
// handshake; the client gets a 502 in Docker's error format and nothing reaches the
// daemon (judged by its record: the create never happened).
TEST_CASE("a tls:// upstream that names another host or chains to another CA gets no request",
          "[integration][tls][upstream]") {
  tls_engine& e = engine();
  const std::string other_ca = make_pki();
  struct attempt {
    std::string what, upstream, ca, logged;
  };
  for (const auto& a : {attempt{"another name", "tls://127.0.0.2:" + e.port(), e.pki() + "/ca.pem",
                                "IP address mismatch"},
                        attempt{"another CA", "tls://127.0.0.1:" + e.port(), other_ca + "/ca.pem",
                                "certificate verify failed"}}) {
    SECTION(a.what) {
      proxy_process proxy("compose/policies/docker-cli.json",
                          {"--upstream-tlscacert", a.ca, "--upstream-tlscert",
                           e.pki() + "/cert.pem", "--upstream-tlskey", e.pki() + "/key.pem"},
                          {}, a.upstream);
      auto ping = raw_exchange(proxy.socket_path(), "GET /_ping HTTP/1.1\r\nHost: d\r\n\r\n");
      INFO(ping.bytes);
      CHECK(ping.status() == 502);
      CHECK(ping.bytes.find("{\"message\":\"dockgate: cannot reach the Docker daemon\"}") !=
            std::string::npos);
      const std::string name = unique_name("utls-refused");
      auto create =
          run(proxy.docker() + " create --name " + name + " --network none " + test_image());
      CHECK(create.status != 0);
      CHECK(run(e.cli() + " container inspect " + name).status != 0);
      auto log = run("cat " + proxy.dir() + "/proxy.err");
      INFO(log.output);
      CHECK(log.output.find("upstream connect failed: TLS handshake") != std::string::npos);
      CHECK(log.output.find(a.logged) != std::string::npos);
    }
  }
  run("rm -rf " + other_ca);
}

// The gate reads only files root controls: a client key (or CA) another user could change
// is refused at start, naming the flag and the file.
TEST_CASE("a tls:// upstream's key or CA a user could change is refused at start",
          "[integration][tls][upstream][trust]") {
  tls_engine& e = engine();
  const std::string pki = make_pki();
  auto start = [&] {
    proxy_process proxy("compose/policies/docker-cli.json", {"--upstream-cert-path", pki}, {},
                        "tls://127.0.0.1:" + e.port());
  };
  CHECK_NOTHROW(start());
  REQUIRE(run("chown 1000:1000 " + pki + "/key.pem").status == 0);
  CHECK_THROWS_WITH(start(), Catch::Contains("--upstream-tlskey " + pki + "/key.pem: refused: \"" +
                                             pki + "/key.pem\" is owned by uid 1000, not root"));
  REQUIRE(run("chown 0:0 " + pki + "/key.pem && chmod 0666 " + pki + "/key.pem").status == 0);
  CHECK_THROWS_WITH(start(), Catch::Contains("--upstream-tlskey " + pki + "/key.pem: refused:"));
  REQUIRE(run("chmod 0600 " + pki + "/key.pem && chmod 0664 " + pki + "/ca.pem").status == 0);
  CHECK_THROWS_WITH(start(), Catch::Contains("--upstream-tlscacert " + pki + "/ca.pem: refused:"));
  run("rm -rf " + pki);
}
