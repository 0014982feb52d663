// SANDBOX_NETWORK=allowlist (issue 21 item 4, docs/sidecar.md "Egress"): a session's only
// way out is the egress proxy (squid, scripts/egress-proxy.sh) on its own internal
// network's gateway, and the proxy lets through only the listed names. No session sees
// another (issue 39 item 1): no name, address or id through the resolver, no packet to
// it, judged by the other session's listener and the resolver's answers. Each way out is judged by
// whether a listener on the host saw it (accepts and datagrams counted here), not by what
// the cell says: the listed name reaches its server; an unlisted name, an IP literal, a
// direct connection past the proxy (to the host's addresses) and DNS to a resolver do not.
// Inside a CONNECT the proxy peeks at the TLS ClientHello: the tunnel reaches the listed
// name's server only when the SNI names a listed name; another SNI (domain fronting), none,
// or bytes that are not TLS, and the server sees no connection at all.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <sstream>
#include <thread>

#include "sidecar_harness.hpp"

using namespace dockgate::test;
using namespace std::chrono_literals;

namespace {

// A listener on the host that counts what reaches it: TCP accepts (answering each with a
// small HTTP response, over TLS when given a context) or UDP datagrams. Bound to
// `address`, port chosen by the kernel.
class counting_listener {
 public:
  counting_listener(const std::string& address, bool udp, SSL_CTX* tls = nullptr) {
    fd_ = ::socket(AF_INET, udp ? SOCK_DGRAM : SOCK_STREAM, 0);
    int one = 1;
    ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    ::inet_pton(AF_INET, address.c_str(), &a.sin_addr);
    REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    socklen_t len = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    if (!udp) REQUIRE(::listen(fd_, 64) == 0);
    thread_ = std::thread([this, udp, tls] {
      while (!stop_) {
        pollfd p{fd_, POLLIN, 0};
        if (::poll(&p, 1, 50) <= 0) continue;
        if (udp) {
          char buf[2048];
          if (::recv(fd_, buf, sizeof buf, 0) >= 0) ++count_;
          continue;
        }
        const int c = ::accept(fd_, nullptr, nullptr);
        if (c < 0) continue;
        ++count_;
        const std::string answer =
            "HTTP/1.1 200 OK\r\nContent-Length: 9\r\nConnection: close\r\n\r\negress-ok";
        char buf[4096];
        timeval two_seconds{2, 0};
        ::setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &two_seconds, sizeof two_seconds);
        if (tls != nullptr) {
          SSL* ssl = SSL_new(tls);
          SSL_set_fd(ssl, c);
          if (SSL_accept(ssl) == 1) {
            const int n = SSL_read(ssl, buf, sizeof buf);
            if (n > 0) {
              std::lock_guard lock(mutex_);
              seen_.append(buf, static_cast<std::size_t>(n));
            }
            SSL_write(ssl, answer.data(), static_cast<int>(answer.size()));
            SSL_shutdown(ssl);
          }
          SSL_free(ssl);
          ::close(c);
          continue;
        }
        pollfd q{c, POLLIN, 0};
        if (::poll(&q, 1, 2000) > 0) {
          const auto n = ::recv(c, buf, sizeof buf, 0);
          if (n > 0) {
            std::lock_guard lock(mutex_);
            seen_.append(buf, static_cast<std::size_t>(n));
          }
        }
        (void)!::send(c, answer.data(), answer.size(), MSG_NOSIGNAL);
        ::close(c);
      }
    });
  }
  ~counting_listener() {
    stop_ = true;
    thread_.join();
    ::close(fd_);
  }
  int port() const { return port_; }
  int count() const { return count_; }
  std::string seen() const {
    std::lock_guard lock(mutex_);
    return seen_;
  }

 private:
  int fd_ = -1;
  int port_ = 0;
  std::atomic<int> count_{0};
  std::atomic<bool> stop_{false};
  mutable std::mutex mutex_;
  std::string seen_;
  std::thread thread_;
};

// The egress proxy of the test: scripts/egress-proxy.sh started on the engine's network
// (directly, as root), stopped (its squid and firewall rules) at the end.
class egress_proxy {
 public:
  egress_proxy(const std::string& dir, const std::string& env) : dir_(dir) {
    auto r = run("cd " + std::string(DOCKGATE_SOURCE_DIR) + " && DOCKER_HOST=" + engine_host() +
                 " EGRESS_POLICY_DIR=" + policies() + " " + env +
                 " scripts/egress-proxy.sh start " + dir_ + " 2>&1");
    INFO(r.output);
    REQUIRE(r.status == 0);
  }
  ~egress_proxy() {
    run(std::string(DOCKGATE_SOURCE_DIR) + "/scripts/egress-proxy.sh stop " + dir_);
  }
  std::string access_log() const { return run("cat " + dir_ + "/access.log").output; }
  // The sessions' lists (egress_policy.hpp), and the sidecar's variable naming them.
  std::string policies() const { return dir_ + "/policies"; }
  std::string policy_env() const { return "SANDBOX_EGRESS_POLICY_DIR=" + policies(); }

 private:
  std::string dir_;
};

// The TLS server of the listed file host: a throwaway self-signed certificate (the cell
// does not verify it: what is judged is where the tunnel went, not who the server is).
struct test_tls_context {
  explicit test_tls_context(const std::string& dir) {
    auto r =
        run("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout " +
            dir + "/tls.key -out " + dir + "/tls.pem -days 1 -subj /CN=files.test 2>&1");
    INFO(r.output);
    REQUIRE(r.status == 0);
    ctx = SSL_CTX_new(TLS_server_method());
    REQUIRE(SSL_CTX_use_certificate_file(ctx, (dir + "/tls.pem").c_str(), SSL_FILETYPE_PEM) == 1);
    REQUIRE(SSL_CTX_use_PrivateKey_file(ctx, (dir + "/tls.key").c_str(), SSL_FILETYPE_PEM) == 1);
  }
  ~test_tls_context() { SSL_CTX_free(ctx); }
  test_tls_context(const test_tls_context&) = delete;
  test_tls_context& operator=(const test_tls_context&) = delete;
  SSL_CTX* ctx = nullptr;
};

std::string trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// The container of session `sid` (its full ID) and what the daemon says of it.
std::string container_of(const std::string& sid) {
  return trimmed(
      run(direct() + " ps -q --no-trunc --filter label=sandbox.session_id=" + sid).output);
}
std::string inspect_field(const std::string& object, const std::string& format) {
  return trimmed(run(direct() + " inspect " + object + " -f '" + format + "'").output);
}

}  // namespace

TEST_CASE("sidecar egress: the listed name through the proxy and nothing else out of the session",
          "[sidecar][egress]") {
  proxy_process gate("compose/policies/sandbox-egress.json");
  const test_tls_context server_tls(gate.dir());
  counting_listener http("127.0.0.1", false);  // the package index (pypi.test), host-local
  counting_listener tls("127.0.0.1", false, server_tls.ctx);  // its file host, TLS by CONNECT
  counting_listener bypass("0.0.0.0", false);                 // a host service on every address
  counting_listener resolver("0.0.0.0", true);                // a DNS server on every address
  // The proxy first: its rules hold every session bridge (dgsbx+) before the first is made.
  // Both names resolve (inside squid) to the host-local servers; other.test too, so that
  // only squid's allowlist stands between a cell and the server.
  const std::string hosts = gate.dir() + "/egress-hosts";  // copied by the script
  std::ofstream(hosts) << "127.0.0.1 pypi.test files.test other.test\n";
  // squid drops to its own user: a directory it can enter (the gate's is root's alone).
  char squid_dir[] = "/tmp/dockgate-egress.XXXXXX";
  REQUIRE(::mkdtemp(squid_dir));
  egress_proxy squid(squid_dir, "SANDBOX_EGRESS_ALLOW=pypi.test,files.test SANDBOX_EGRESS_PORTS=" +
                                    std::to_string(http.port()) + "," + std::to_string(tls.port()) +
                                    " EGRESS_HOSTS_FILE=" + hosts);
  sidecar_process sidecar(gate,
                          {"SANDBOX_NETWORK=allowlist", "SANDBOX_EGRESS_ALLOW=pypi.test,files.test",
                           "SANDBOX_WARM_POOL=0", squid.policy_env()});
  const std::string sid = new_session(sidecar);
  const std::string container = container_of(sid);
  REQUIRE_FALSE(container.empty());
  // The session's own network, as the daemon keeps it: the sidecar's (owner label),
  // internal, on a bridge named by the gate (dgsbx<hash>) that is on this host.
  const std::string network = "dockgate-egress-" + sid;
  const std::string net = inspect_field(network,
                                        "{{.Internal}} {{index .Labels \"dockgate.owner\"}} "
                                        "{{index .Options \"com.docker.network.bridge.name\"}} "
                                        "{{range .IPAM.Config}}{{.Gateway}}{{end}}");
  INFO(net << "\n" << sidecar.log());
  REQUIRE(net.starts_with("true sandbox dgsbx"));
  const std::string bridge = net.substr(13, 15);
  const std::string gateway = net.substr(13 + 16);
  CHECK(run("ip link show " + bridge + " >/dev/null 2>&1").status == 0);
  // The session's container joined that network and no other, with the proxy named.
  CHECK(inspect_field(container,
                      "{{.HostConfig.NetworkMode}} {{range $k, $v := "
                      ".NetworkSettings.Networks}}{{$k}} {{end}}") == network + " " + network);
  const std::string env =
      run(direct() + " inspect " + container + " -f '{{json .Config.Env}}'").output;
  const std::string proxy_url = "http://" + gateway + ":3128";
  for (const char* name :
       {"HTTP_PROXY=", "HTTPS_PROXY=", "http_proxy=", "https_proxy=", "PIP_PROXY="})
    CHECK_THAT(env, Catch::Contains(std::string(name) + proxy_url));
  const std::string host_address = trimmed(
      run("ip -4 -o addr show scope global | awk '{split($4, a, \"/\"); print a[1]}' | grep -vx '" +
          gateway + "' | head -1")
          .output);
  REQUIRE_FALSE(host_address.empty());

  // Each cell prints its own view; the counts on the host decide.
  auto cell = [&](const std::string& code) {
    const std::string out = sidecar.exec(sid, code);
    UNSCOPED_INFO("cell: " << out);
    return out;
  };
  // Through the proxy always (NO_PROXY would send 127.0.0.1 past it, to the cell's own).
  const std::string http_get = R"(import os, urllib.request, sys
opener = urllib.request.build_opener(urllib.request.ProxyHandler({'http': os.environ['HTTP_PROXY']}))
try:
    print(opener.open(sys.argv_url, timeout=10).read().decode())
except Exception as e:
    print('refused', e)
)";
  auto get = [&](const std::string& url) {
    std::string code = http_get;
    code.replace(code.find("sys.argv_url"), 12, "'" + url + "'");
    return cell(code);
  };
  // Everything the peer sends until it closes (an answer may come in several reads).
  const std::string drain =
      "def drain(s):\n    data = b''\n    while True:\n        try:\n            b = s.recv(4096)\n"
      "        except OSError:\n            return data\n        if not b:\n            return "
      "data\n"
      "        data += b\n";
  // CONNECT, then a TLS handshake whose ClientHello names `sni` ("" for no SNI at all), or,
  // with `raw`, those bytes instead of TLS; prints what came back.
  auto tunnel = [&](const std::string& authority, const std::string& sni,
                    const std::string& raw = "") {
    return cell(
        drain +
        "import os, socket, ssl\nu = os.environ['HTTPS_PROXY'][len('http://'):].split(':')\n"
        "s = socket.create_connection((u[0], int(u[1])), timeout=10)\n"
        "s.sendall(b'CONNECT " +
        authority + " HTTP/1.1\\r\\nHost: " + authority +
        "\\r\\n\\r\\n')\nhead = s.recv(4096).split(b'\\r\\n')[0]\nprint(head)\n"
        "raw = b'" +
        raw +
        "'\n"
        "try:\n"
        "    if raw:\n        s.sendall(raw); print('answer', drain(s))\n"
        "    else:\n"
        "        c = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT); c.check_hostname = False\n"
        "        c.verify_mode = ssl.CERT_NONE\n"
        "        t = c.wrap_socket(s, server_hostname=" +
        (sni.empty() ? std::string("None") : "'" + sni + "'") +
        ")\n"
        "        t.sendall(b'GET /packages/x.whl HTTP/1.1\\r\\nHost: files.test\\r\\n\\r\\n')\n"
        "        print('answer', drain(t))\n"
        "except Exception as e:\n    print('refused', e)\n");
  };
  // Plain HTTP with a Host header of its own (the request line's URL is absolute).
  auto get_with_host = [&](const std::string& url, const std::string& host) {
    return cell(drain +
                "import os, socket\nu = os.environ['HTTP_PROXY'][len('http://'):].split(':')\n"
                "s = socket.create_connection((u[0], int(u[1])), timeout=10)\n"
                "s.sendall(b'GET " +
                url + " HTTP/1.1\\r\\nHost: " + host +
                "\\r\\nConnection: close\\r\\n\\r\\n')\nprint(drain(s))\n");
  };

  // An unlisted name and every IP literal are refused by the proxy: no server saw them.
  const std::string p = std::to_string(http.port()), t = std::to_string(tls.port());
  CHECK_THAT(get("http://other.test:" + p + "/"), Catch::Contains("403"));
  CHECK_THAT(get("http://pypi.test.other.test:" + p + "/"), Catch::Contains("403"));
  for (const std::string literal : {"127.0.0.1", "2130706433", "0x7f000001", "127.1", "[::1]"})
    CHECK_THAT(get("http://" + literal + ":" + p + "/"), Catch::Contains("refused"));
  // A refused CONNECT: squid (ssl-bump port) answers 200, then its 403 inside the tunnel
  // over its throwaway certificate; the server is never connected.
  CHECK_THAT(tunnel("other.test:" + t, "other.test"), Catch::Contains("403"));
  CHECK_THAT(tunnel("127.0.0.1:" + t, "files.test"), Catch::Contains("403"));
  // A Host header naming a listed name does not carry an unlisted URL through.
  CHECK_THAT(get_with_host("http://other.test:" + p + "/", "pypi.test:" + p),
             Catch::Contains("403"));
  CHECK(http.count() == 0);
  // Inside a tunnel to a listed name: an unlisted SNI (fronting), no SNI, bytes that are
  // not TLS. squid answers the CONNECT before it peeks; the server decides: no connection.
  CHECK_THAT(tunnel("files.test:" + t, "other.test"), !Catch::Contains("egress-ok"));
  CHECK(tls.count() == 0);
  CHECK_THAT(tunnel("files.test:" + t, "pypi.test.other.test"), !Catch::Contains("egress-ok"));
  CHECK(tls.count() == 0);
  CHECK_THAT(tunnel("files.test:" + t, ""), !Catch::Contains("egress-ok"));
  CHECK(tls.count() == 0);
  CHECK_THAT(tunnel("files.test:" + t, "", "GET / HTTP/1.1\\r\\nHost: files.test\\r\\n\\r\\n"),
             !Catch::Contains("egress-ok"));
  CHECK(tls.count() == 0);
  CHECK_THAT(tunnel("files.test:" + t, "", "SSH-2.0-OpenSSH_9.2\\r\\n"),
             !Catch::Contains("egress-ok"));
  // A listed name on a port not listed.
  CHECK_THAT(get("http://pypi.test:" + std::to_string(bypass.port()) + "/"),
             Catch::Contains("403"));
  CHECK(http.count() == 0);
  CHECK(tls.count() == 0);
  CHECK(bypass.count() == 0);
  // Past the proxy: no host address, no port but the proxy's, no DNS.
  const std::string b = std::to_string(bypass.port()), r = std::to_string(resolver.port());
  // The connects wait out their timeouts side by side (a silent drop is a timeout).
  cell(
      "import socket, threading\ndef probe(h, p):\n"
      "    try:\n        socket.create_connection((h, p), timeout=3); print(h, p, 'connected')\n"
      "    except OSError as e:\n        print(h, p, e)\n"
      "probes = [threading.Thread(target=probe, args=(h, p)) for h in ['" +
      gateway + "', '" + host_address + "'] for p in [" + b +
      ", 22, 53]]\n"
      "for t in probes: t.start()\nfor t in probes: t.join()\n"
      "query = bytes.fromhex('123401000001000000000000047079706904746573740000010001')\n"
      "for h in ['" +
      gateway + "', '" + host_address +
      "']:\n"
      "    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
      "    try:\n        u.sendto(query, (h, " +
      r +
      ")); u.sendto(query, (h, 53)); print('sent', h)\n"
      "    except OSError as e:\n        print(h, e)\n");
  // The session resolves no name itself: only the proxy does.
  CHECK_THAT(cell("import os, socket\nos.environ['RES_OPTIONS'] = 'timeout:1 attempts:1'\n"
                  "try:\n    print(socket.getaddrinfo('pypi.test', 80))\n"
                  "except OSError as e:\n    print('no dns', e)\n"),
             Catch::Contains("no dns"));
  // Datagrams are not retried: a short wait lets any that got through arrive.
  std::this_thread::sleep_for(500ms);
  CHECK(bypass.count() == 0);
  CHECK(resolver.count() == 0);
  // A listed name, plain HTTP and CONNECT, reaches its server through the proxy (last: the
  // counts above stay those of the refusals alone).
  CHECK_THAT(get("http://pypi.test:" + std::to_string(http.port()) + "/simple/numpy/"),
             Catch::Contains("egress-ok"));
  CHECK(http.count() == 1);
  CHECK_THAT(http.seen(), Catch::StartsWith("GET /simple/numpy/ HTTP/1.1"));
  // A Host header of its own goes to the URL's (listed) host, which squid names in Host.
  CHECK_THAT(get_with_host("http://pypi.test:" + p + "/simple/", "other.test"),
             Catch::Contains("egress-ok"));
  CHECK(http.count() == 2);
  CHECK_THAT(http.seen(), Catch::Contains("Host: pypi.test:" + p));
  CHECK_THAT(http.seen(), !Catch::Contains("other.test"));
  // The listed name with its own name as SNI: the TLS session is end to end, squid only
  // splices (the server's answer came back through the tunnel, decrypted by the cell).
  CHECK_THAT(tunnel("files.test:" + t, "files.test"), Catch::Contains("egress-ok"));
  CHECK(tls.count() == 1);
  CHECK_THAT(tls.seen(), Catch::StartsWith("GET /packages/x.whl HTTP/1.1"));
  sidecar.call("DELETE", "/sessions/" + sid, "");
  // The network went with its session.
  CHECK(run(direct() + " network inspect " + network + " >/dev/null 2>&1").status != 0);
  CHECK(run("ip link show " + bridge + " >/dev/null 2>&1").status != 0);
}

TEST_CASE("sidecar egress: a session sees no other session (no name, no address, no packet)",
          "[sidecar][egress]") {
  proxy_process gate("compose/policies/sandbox-egress.json");
  char squid_dir[] = "/tmp/dockgate-egress.XXXXXX";
  REQUIRE(::mkdtemp(squid_dir));
  egress_proxy squid(squid_dir, "SANDBOX_EGRESS_ALLOW=pypi.test");
  sidecar_process sidecar(gate, {"SANDBOX_NETWORK=allowlist", "SANDBOX_EGRESS_ALLOW=pypi.test",
                                 "SANDBOX_WARM_POOL=0", squid.policy_env()});
  const std::string a = new_session(sidecar), b = new_session(sidecar);
  const std::string b_container = container_of(b);
  REQUIRE_FALSE(b_container.empty());
  // What a neighbour is known by: its name (with the session id), its short ID (an alias
  // on a user-defined network, and its hostname), its address, its network's gateway.
  const std::string b_name = inspect_field(b_container, "{{.Name}}").substr(1);
  const std::string b_hostname = inspect_field(b_container, "{{.Config.Hostname}}");
  const std::string b_address =
      inspect_field(b_container, "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}");
  const std::string b_gateway =
      inspect_field(b_container, "{{range .NetworkSettings.Networks}}{{.Gateway}}{{end}}");
  INFO("b: " << b_name << " " << b_hostname << " " << b_address << " via " << b_gateway);
  REQUIRE(b_name == "dockgate-sbx-" + b);
  REQUIRE_FALSE(b_address.empty());

  // B listens on a TCP port for 15 s and says how many connections it accepted; once the
  // kernel shows the listener (B's /proc/net/tcp, read by the daemon's exec), A, knowing
  // everything the test knows, looks B up every way the resolver answers, and tries TCP,
  // ICMP echo (an unprivileged datagram socket) and B's gateway.
  std::string b_out;
  std::thread listener([&] {
    b_out = sidecar.exec(b, R"(import socket, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('0.0.0.0', 7000))
s.listen(8)
s.settimeout(0.2)
n = 0
end = time.time() + 15
while time.time() < end:
    try:
        c, _ = s.accept()
        n += 1
        c.close()
    except OSError:
        pass
print('accepted', n)
)");
  });
  bool listening = false;
  for (int i = 0; i < 100 && !listening; ++i) {
    listening =
        run(direct() + " exec " + b_container + " grep -q ':1B58 00000000:0000 0A' /proc/net/tcp")
            .status == 0;
    if (!listening) std::this_thread::sleep_for(100ms);
  }
  if (!listening) listener.join();
  REQUIRE(listening);
  // A's probes of B's address and gateway go first, while B listens; then the names, with
  // the resolver's wait cut to a second a try (glibc reads RES_OPTIONS at its first lookup):
  // a name the network's DNS does not know is not answered sooner by waiting longer.
  const std::string a_out =
      sidecar.exec(a,
                   "import os, socket, struct\nos.environ['RES_OPTIONS'] = 'timeout:1 attempts:1'\n"
                   "names = ['" +
                       b_name + "', '" + b_hostname + "', '" + b_name + ".dockgate-egress-" + b +
                       "', '" + b_name + ".dockgate-egress', '" + b + "']\n" + "addresses = ['" +
                       b_address + "', '" + b_gateway + "']\n" +
                       R"(for i, ip in enumerate(addresses):
    try:
        socket.create_connection((ip, 7000), timeout=3)
        print('address', i, 'tcp connected')
    except OSError as e:
        print('address', i, 'tcp', 'refused' if isinstance(e, ConnectionRefusedError) else 'silent')
    try:
        p = socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_ICMP)
        p.settimeout(2)
        p.sendto(struct.pack('!BBHHH', 8, 0, 0, 1, 1) + b'x' * 8, (ip, 0))
        p.recv(64)
        print('address', i, 'icmp answered')
    except OSError as e:
        print('address', i, 'icmp silent')
for i, n in enumerate(names):
    try:
        print('name', i, 'resolved', socket.gethostbyname(n))
    except OSError as e:
        print('name', i, 'none')
for i, ip in enumerate(addresses):
    try:
        print('address', i, 'resolved', socket.gethostbyaddr(ip)[0])
    except OSError as e:
        print('address', i, 'none')
print('probes done')
)");
  listener.join();
  INFO("a: " << a_out << "\nb: " << b_out);
  // The daemon's record and B's own count decide: B accepted nothing; A's resolver knew
  // none of B's names, its address or its gateway; no TCP answer (not even a refusal) and
  // no echo reply came back.
  CHECK_THAT(b_out, Catch::Contains("accepted 0"));
  CHECK_THAT(a_out, Catch::Contains("probes done"));  // the cell ran to its end
  CHECK_THAT(a_out, !Catch::Contains("resolved"));
  CHECK_THAT(a_out, !Catch::Contains("connected"));
  CHECK_THAT(a_out, !Catch::Contains("refused"));
  CHECK_THAT(a_out, !Catch::Contains("answered"));
  CHECK_THAT(a_out, !Catch::Contains(b));
  // Each session is alone on its network: the daemon lists one container on each.
  for (const std::string& sid : {a, b})
    CHECK(trimmed(run(direct() + " network inspect dockgate-egress-" + sid +
                      " -f '{{len .Containers}}'")
                      .output) == "1");
  sidecar.call("DELETE", "/sessions/" + a, "");
  sidecar.call("DELETE", "/sessions/" + b, "");
}

TEST_CASE(
    "sidecar egress: warm pool containers each have a network of their own, which goes with them",
    "[sidecar][egress]") {
  proxy_process gate("compose/policies/sandbox-egress.json");
  char squid_dir[] = "/tmp/dockgate-egress.XXXXXX";
  REQUIRE(::mkdtemp(squid_dir));
  egress_proxy squid(squid_dir, "SANDBOX_EGRESS_ALLOW=pypi.test");
  const std::string instance =
      "t" + std::to_string(std::hash<std::string>{}(gate.dir()) % 1000000007);
  // The instance's session networks, as the daemon lists them (label sandbox.instance).
  auto networks = [&] {
    return trimmed(
        run(direct() + " network ls -q --filter label=sandbox.instance=" + instance + " | wc -l")
            .output);
  };
  // Each warm container on its own network: named for the container, alone on it.
  auto each_alone = [&](const std::string& ids) {
    std::istringstream in(ids);
    int n = 0;
    for (std::string id; in >> id; ++n) {
      const std::string name = inspect_field(id, "{{.Name}}").substr(1);
      const std::string mode = inspect_field(id, "{{.HostConfig.NetworkMode}}");
      CHECK(mode == "dockgate-egress-" + name.substr(std::string("dockgate-sbx-").size()));
      CHECK(inspect_field(mode, "{{len .Containers}}") == "1");
    }
    return n;
  };
  std::string claimed;
  {
    sidecar_process sidecar(gate, {"SANDBOX_NETWORK=allowlist", "SANDBOX_EGRESS_ALLOW=pypi.test",
                                   "SANDBOX_WARM_POOL=2", squid.policy_env()});
    auto warm = [&] {
      return run(direct() + " ps -q --no-trunc --filter label=sandbox.instance=" + instance +
                 " --filter label=sandbox.pool")
          .output;
    };
    std::string ids;
    for (int i = 0; i < 300; ++i) {
      ids = warm();
      if (std::count(ids.begin(), ids.end(), '\n') == 2) break;
      std::this_thread::sleep_for(100ms);
    }
    INFO(ids << sidecar.log());
    REQUIRE(each_alone(ids) == 2);
    // A session takes a warm container, and with it that container's network and proxy.
    const std::string sid = new_session(sidecar);
    claimed = container_of(sid);
    REQUIRE_FALSE(claimed.empty());
    const std::string gateway =
        inspect_field(claimed, "{{range .NetworkSettings.Networks}}{{.Gateway}}{{end}}");
    CHECK_THAT(sidecar.exec(sid, "import os; print(os.environ['HTTP_PROXY'])"),
               Catch::Contains("http://" + gateway + ":3128"));
    // The pool refills: every warm container and the session's, each alone on its own.
    for (int i = 0; i < 300 && std::count(ids.begin(), ids.end(), '\n') != 2; ++i) {
      std::this_thread::sleep_for(100ms);
      ids = warm();
    }
    each_alone(ids + claimed + "\n");
    const std::string mode = inspect_field(claimed, "{{.HostConfig.NetworkMode}}");
    sidecar.call("DELETE", "/sessions/" + sid, "");
    // The session's network went with its container.
    CHECK(run(direct() + " network inspect " + mode + " >/dev/null 2>&1").status != 0);
  }
  // The sidecar stopped: its warm containers went, and every network with them.
  CHECK(networks() == "0");
}

TEST_CASE("sidecar egress: an OpenSandbox sandbox's networkPolicy is its own list at the proxy",
          "[sidecar][egress][netpolicy]") {
  // Two names of the operator's list, each served by a listener of its own; sandbox A asks
  // for a.example, B for b.example, C for nothing. Each reaches its own and nothing else,
  // judged by the listeners' counts of connections; inside a CONNECT to A's name, an SNI
  // naming B's (the operator's, not A's) reaches no server either.
  proxy_process gate("compose/policies/sandbox-egress.json");
  const test_tls_context server_tls(gate.dir());
  counting_listener a_server("127.0.0.1", false);
  counting_listener b_server("127.0.0.1", false);
  counting_listener a_tls("127.0.0.1", false, server_tls.ctx);
  const std::string hosts = gate.dir() + "/egress-hosts";
  std::ofstream(hosts) << "127.0.0.1 a.example b.example\n";
  char squid_dir[] = "/tmp/dockgate-egress.XXXXXX";
  REQUIRE(::mkdtemp(squid_dir));
  const std::string pa = std::to_string(a_server.port()), pb = std::to_string(b_server.port()),
                    pt = std::to_string(a_tls.port());
  egress_proxy squid(squid_dir, "SANDBOX_EGRESS_ALLOW=a.example,b.example SANDBOX_EGRESS_PORTS=" +
                                    pa + "," + pb + "," + pt + " EGRESS_HOSTS_FILE=" + hosts);
  sidecar_process sidecar(
      gate, {"SANDBOX_NETWORK=allowlist", "SANDBOX_EGRESS_ALLOW=a.example,b.example",
             "SANDBOX_WARM_POOL=0", "SANDBOX_ALLOW_NO_AUTH=1", "SANDBOX_IMAGES=" + runtime_image(),
             squid.policy_env()});
  auto sandbox = [&](const std::string& policy) {
    std::string body =
        R"({"image":{"uri":")" + runtime_image() + R"("},"entrypoint":["tail","-f","/dev/null"])";
    if (!policy.empty())
      body += R"(,"networkPolicy":{"defaultAction":"deny","egress":[{"action":"allow","target":")" +
              policy + R"("}]})";
    auto made = sidecar.call("POST", "/v1/sandboxes", body + "}", "");
    INFO(made.body << sidecar.log());
    REQUIRE(made.status == 202);
    return made.body.substr(7, 32);
  };
  const std::string a = sandbox("a.example"), b = sandbox("b.example"), c = sandbox("");
  // A request from inside sandbox `id` (as its user, through its own proxy): what came back.
  auto from = [&](const std::string& id, const std::string& code) {
    const std::string out = run(direct() + " exec -u 1000:1000 dockgate-sbx-" + id +
                                " python3 -c \"" + code + "\" 2>&1")
                                .output;
    UNSCOPED_INFO(id.substr(0, 6) << ": " << out);
    return out;
  };
  auto get = [&](const std::string& id, const std::string& url) {
    return from(id,
                "import os, urllib.request as u\n"
                "o = u.build_opener(u.ProxyHandler({'http': os.environ['HTTP_PROXY']}))\n"
                "try: print(o.open('" +
                    url +
                    "', timeout=10).read().decode())\n"
                    "except Exception as e: print('refused', e)");
  };
  // CONNECT to a.example's TLS server with `sni` in the ClientHello.
  auto tunnel = [&](const std::string& id, const std::string& sni) {
    return from(id,
                "import os, socket, ssl\n"
                "h, p = os.environ['HTTPS_PROXY'][7:].split(':')\n"
                "s = socket.create_connection((h, int(p)), timeout=10)\n"
                "s.sendall(b'CONNECT a.example:" +
                    pt +
                    " HTTP/1.1\\\\r\\\\nHost: a.example\\\\r\\\\n\\\\r\\\\n')\n"
                    "s.recv(4096)\n"
                    "c = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT); c.check_hostname = False; "
                    "c.verify_mode = ssl.CERT_NONE\n"
                    "try:\n t = c.wrap_socket(s, server_hostname='" +
                    sni +
                    "')\n"
                    " t.sendall(b'GET / HTTP/1.1\\\\r\\\\nHost: a.example\\\\r\\\\n\\\\r\\\\n'); "
                    "print(t.recv(4096))\n"
                    "except Exception as e: print('refused', e)");
  };
  // Each one's refusals first: no server saw any of them.
  CHECK_THAT(get(a, "http://b.example:" + pb + "/"), Catch::Contains("403"));
  CHECK_THAT(get(b, "http://a.example:" + pa + "/"), Catch::Contains("403"));
  CHECK_THAT(get(c, "http://a.example:" + pa + "/"), Catch::Contains("403"));
  CHECK_THAT(get(c, "http://b.example:" + pb + "/"), Catch::Contains("403"));
  CHECK_THAT(tunnel(a, "b.example"), !Catch::Contains("egress-ok"));
  CHECK_THAT(tunnel(b, "a.example"), !Catch::Contains("egress-ok"));
  CHECK(a_server.count() == 0);
  CHECK(b_server.count() == 0);
  CHECK(a_tls.count() == 0);
  // Then each its own name: one connection each.
  CHECK_THAT(get(a, "http://a.example:" + pa + "/"), Catch::Contains("egress-ok"));
  CHECK_THAT(get(b, "http://b.example:" + pb + "/"), Catch::Contains("egress-ok"));
  CHECK_THAT(tunnel(a, "a.example"), Catch::Contains("egress-ok"));
  CHECK(a_server.count() == 1);
  CHECK(b_server.count() == 1);
  CHECK(a_tls.count() == 1);
  // A's list goes with it (before its network); B's and C's stay.
  const std::string a_gateway =
      inspect_field("dockgate-sbx-" + a, "{{range .NetworkSettings.Networks}}{{.Gateway}}{{end}}");
  CHECK(run("test -s " + squid.policies() + "/" + a_gateway).status == 0);
  CHECK(sidecar.call("DELETE", "/v1/sandboxes/" + a, "", "").status == 204);
  CHECK(run("test -e " + squid.policies() + "/" + a_gateway).status != 0);
  CHECK(trimmed(run("ls " + squid.policies() + " | wc -l").output) == "2");
  sidecar.call("DELETE", "/v1/sandboxes/" + b, "", "");
  sidecar.call("DELETE", "/v1/sandboxes/" + c, "", "");

  // The same through OpenSandbox's own JS SDK (when scripts/node-clients.sh installed it):
  // its create with a networkPolicy, its getEgressPolicy, its patchEgressRules refused, a
  // policy beyond the operator's list refused.
  const char* modules = std::getenv("DOCKGATE_NODE_PATH");
  if (!modules || !*modules) return;
  auto sdk =
      run("NODE_PATH=" + std::string(modules) + " OPEN_SANDBOX_DOMAIN=127.0.0.1:" + sidecar.port() +
          " OPEN_SANDBOX_API_KEY=" + api_key + " timeout 120 node " + repo_root() +
          "/tests/integration/clients/opensandbox_egress.js " + runtime_image() +
          " http://a.example:" + pa + "/");
  INFO(sdk.output);
  CHECK(sdk.status == 0);
  CHECK_THAT(sdk.output, Catch::Contains(R"("fetched":"egress-ok\n")"));
  CHECK(a_server.count() == 2);
  CHECK_THAT(
      sdk.output,
      Catch::Contains(
          R"("policy":{"defaultAction":"deny","egress":[{"action":"allow","target":"a.example"}]})"));
  // Refused (the sidecar's answer is 501 with the reason; the HTTP server's head parser,
  // which knows no PATCH, answers 400 before it), and the policy unchanged.
  CHECK_THAT(sdk.output, Catch::Contains(R"("patch":{"status":)"));
  CHECK_THAT(
      sdk.output,
      Catch::Contains(
          R"("policy_after":{"defaultAction":"deny","egress":[{"action":"allow","target":"a.example"}]})"));
  CHECK_THAT(sdk.output, Catch::Contains(R"("wider":{"status":400)"));
}
