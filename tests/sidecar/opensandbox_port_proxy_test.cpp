// The proxy path to a sandbox's own ports (front/opensandbox/port_proxy.cpp over
// commands::connect), on the fake engine whose held exec runs the relay on the host: a
// real app (python3's http.server) answers on a loopback port, and each case judges the
// bytes the app received (what reached it of the request, what was kept from it) and the
// bytes the client got (status, fields, the body whole or cut) — through the relay's
// python3, its bash fallback, and an image with neither.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "core/session_core.hpp"
#include "fake_engine.hpp"
#include "front/opensandbox/access_token.hpp"
#include "front/opensandbox/routes.hpp"

using namespace dockgate;
using namespace dockgate::sidecar;

namespace {

const std::string sbx = "fedcba9876543210fedcba9876543210";

// An app on a loopback port of the host: echoes what it received as JSON at /echo, and
// answers chunked (/chunked), framed by its close (/close), cut short (/cut), 204 (/none).
constexpr std::string_view app_source = R"py(
import json, socket, sys
from http.server import BaseHTTPRequestHandler, HTTPServer
class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def answer(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n).decode() if n else ""
        if self.path.startswith("/echo"):
            out = json.dumps({"method": self.command, "path": self.path, "body": body,
                              "headers": {k.lower(): v for k, v in self.headers.items()}}).encode()
            self.send_response(200); self.send_header("Content-Type", "application/json")
            self.send_header("X-App", "yes"); self.send_header("Cache-Control", "max-age=5")
            self.send_header("Content-Length", str(len(out))); self.end_headers(); self.wfile.write(out)
        elif self.path == "/chunked":
            self.send_response(200); self.send_header("Transfer-Encoding", "chunked"); self.end_headers()
            for part in (b"hello ", b"world"):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part)); self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
        elif self.path == "/close":
            self.wfile.write(b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil close")
            self.close_connection = True
        elif self.path == "/cut":
            self.send_response(200); self.send_header("Content-Length", "100"); self.end_headers()
            self.wfile.write(b"only ten.."); self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR); self.close_connection = True
        elif self.path == "/none":
            self.send_response(204); self.end_headers()
        elif self.path == "/ws" and self.headers.get("Upgrade") == "websocket":
            self.wfile.write(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                             b"Connection: Upgrade\r\nX-Seen: " + self.headers.get("Sec-WebSocket-Key", "").encode() +
                             b"\r\n\r\n")
            self.wfile.flush()
            while True:
                data = self.connection.recv(65536)
                if not data: break
                self.connection.sendall(data.upper())
            self.close_connection = True
    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = answer
s = HTTPServer(("127.0.0.1", 0), H)
open(sys.argv[1], "w").write(str(s.server_address[1]))
s.serve_forever()
)py";

struct app {
  pid_t pid = -1;
  std::uint16_t port = 0;
  app() {
    const auto dir = std::filesystem::temp_directory_path();
    const auto script = dir / ("dg-port-app-" + std::to_string(::getpid()) + ".py");
    const auto port_file = dir / ("dg-port-app-" + std::to_string(::getpid()) + ".port");
    std::filesystem::remove(port_file);
    std::ofstream(script) << app_source;
    pid = ::fork();
    if (pid == 0) {
      ::execlp("python3", "python3", script.c_str(), port_file.c_str(), nullptr);
      ::_exit(127);
    }
    for (int i = 0; i < 200 && port == 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
      std::ifstream in(port_file);
      int p = 0;
      if (in >> p) port = static_cast<std::uint16_t>(p);
    }
    REQUIRE(port != 0);
  }
  ~app() {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }
};

bool send_all(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

// Held execs run on the host under `env -i PATH=<path>`: the process's stdin is what the
// stream's writer sends, its stdout and stderr come back in Docker's 8-byte frames; the
// stream ends when the process has exited and closed both.
struct host_execs {
  std::string path = "/usr/bin:/bin";
  std::vector<std::thread> threads;
  std::vector<std::vector<std::string>> cmds;
  ~host_execs() {
    for (auto& t : threads) t.join();
  }
  std::optional<client::exec_stream> attach(const std::vector<std::string>& cmd) {
    ::signal(SIGPIPE, SIG_IGN);
    cmds.push_back(cmd);
    int sv[2], in[2], out[2], err[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
    REQUIRE((::pipe2(in, O_CLOEXEC) == 0 && ::pipe2(out, O_CLOEXEC) == 0 &&
             ::pipe2(err, O_CLOEXEC) == 0));
    std::vector<std::string> args{"env", "-i", "PATH=" + path};
    args.insert(args.end(), cmd.begin(), cmd.end());
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::dup2(in[0], 0), ::dup2(out[1], 1), ::dup2(err[1], 2);
      ::execv("/usr/bin/env", argv.data());
      ::_exit(127);
    }
    ::close(in[0]), ::close(out[1]), ::close(err[1]);
    const int theirs = sv[1];
    threads.emplace_back([theirs, to = in[1]] {
      char buf[65536];
      for (ssize_t n; (n = ::read(theirs, buf, sizeof buf)) > 0;)
        if (::write(to, buf, static_cast<std::size_t>(n)) != n) break;
      ::close(to);
    });
    threads.emplace_back([theirs, o = out[0], e = err[0], pid] {
      pollfd fds[2] = {{o, POLLIN, 0}, {e, POLLIN, 0}};
      char buf[65536];
      for (int open = 2; open > 0;) {
        ::poll(fds, 2, -1);
        for (int i = 0; i < 2; ++i) {
          if (fds[i].fd < 0 || !fds[i].revents) continue;
          const ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
          if (n <= 0) {
            ::close(fds[i].fd), fds[i].fd = -1, --open;
            continue;
          }
          const auto len = static_cast<std::uint32_t>(n);
          const char head[8] = {static_cast<char>(i + 1),
                                0,
                                0,
                                0,
                                static_cast<char>(len >> 24),
                                static_cast<char>(len >> 16),
                                static_cast<char>(len >> 8),
                                static_cast<char>(len)};
          send_all(theirs, std::string_view(head, 8));
          send_all(theirs, std::string_view(buf, len));
        }
      }
      ::waitpid(pid, nullptr, 0);
      ::shutdown(theirs, SHUT_RDWR);
    });
    return client::exec_stream(client::connection::adopt(sv[0]), "", "host-exec");
  }
};

struct recording final : reply_stream {
  std::string text;
  unsigned status = 0;
  std::string type;
  header_fields fields;
  // A switch of protocols: the client's end of a socketpair, driven by `client`.
  std::function<void(int fd)> client;
  std::thread client_thread;
  ~recording() {
    if (client_thread.joinable()) client_thread.join();
  }
  std::optional<raw_connection> switch_protocols(const header_fields& f) override {
    if (!client) return std::nullopt;
    status = 101, fields = f;
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return std::nullopt;
    client_thread = std::thread([this, fd = sv[1]] {
      client(fd);
      ::close(fd);
    });
    return raw_connection{sv[0], "early "};
  }
  bool open(unsigned s, std::string_view t, const header_fields& f) override {
    status = s, type = std::string(t), fields = f;
    return true;
  }
  bool write(std::string_view d) override {
    text += d;
    return true;
  }
  bool opened() const override { return status != 0; }
};

struct rig {
  config cfg;
  testing::fake_engine fake;
  host_execs host;
  std::unique_ptr<session_core> core;
  std::shared_ptr<session> s = std::make_shared<session>();
  rig() {
    cfg.warm_pool = 0;
    cfg.queue_timeout_seconds = 0;
    cfg.cell_runner = false;
    cfg.api_key = "k";
    core = std::make_unique<session_core>(cfg, fake, nullptr);
    s->id = sbx;
    s->container = "sbx-" + sbx;
    fake.add_running(s->container, {});
    core->registry.add(s);
    fake.on_attach = [this](const auto&, const auto& cmd, std::string*) {
      return host.attach(cmd);
    };
  }
  // `method` `path` (after /proxy/) with the sandbox's token, answered into `out`.
  http_reply call(recording& out, const std::string& method, const std::string& path,
                  const std::string& query = {}, const std::string& body = {},
                  header_fields more = {}) {
    http_request r;
    r.method = method;
    const auto q = path.find('?');
    r.path = "/v1/sandboxes/" + sbx + "/proxy/" + path.substr(0, q);
    r.query = q == std::string::npos ? query : path.substr(q + 1);
    r.body = body;
    r.stream = &out;
    r.fields = {{"x-execd-access-token", opensandbox::access_token(cfg, sbx)},
                {"host", "sidecar.example:8090"},
                {"cookie", "session=secret"},
                {"open-sandbox-api-key", "k"}};
    r.fields.insert(r.fields.end(), more.begin(), more.end());
    r.authorization = "Bearer not-for-the-app";
    return opensandbox::serve(*core, r);
  }
};

std::string field(const header_fields& f, const std::string& name) {
  for (const auto& [n, v] : f)
    if (n == name) return v;
  return "<none>";
}

}  // namespace

TEST_CASE(
    "proxy path to an app's port: the request reaches it without the sidecar's credentials, "
    "its answer comes back with its own fields",
    "[opensandbox][port-proxy]") {
  app a;
  rig r;
  recording out;
  const auto p = std::to_string(a.port);
  auto reply = r.call(out, "POST", p + "/echo/x%20y?a=1&b=%20", {}, R"({"n":1})",
                      {{"x-custom", "v"}, {"content-type", "application/json"}});
  REQUIRE(reply.streamed);
  CHECK(out.status == 200);
  CHECK(out.type == "application/json");
  CHECK(field(out.fields, "X-App") == "yes");
  CHECK(field(out.fields, "Cache-Control") == "max-age=5");
  CHECK(field(out.fields, "X-Request-ID") != "<none>");
  CHECK(field(out.fields, "Content-Length") == "<none>");  // re-framed as chunks
  // What the app received.
  CHECK(out.text.find(R"("method": "POST")") != std::string::npos);
  CHECK(out.text.find(R"("path": "/echo/x%20y?a=1&b=%20")") != std::string::npos);
  CHECK(out.text.find(R"("body": "{\"n\":1}")") != std::string::npos);
  CHECK(out.text.find(R"("host": "127.0.0.1:)" + p + "\"") != std::string::npos);
  CHECK(out.text.find(R"("x-forwarded-host": "sidecar.example:8090")") != std::string::npos);
  CHECK(out.text.find(R"("x-custom": "v")") != std::string::npos);
  CHECK(out.text.find(R"("connection": "close")") != std::string::npos);
  for (const char* kept : {"x-execd-access-token", "cookie", "authorization",
                           "open-sandbox-api-key", "secret", "not-for-the-app"})
    CHECK(out.text.find(kept) == std::string::npos);
  // The relay was asked for that port, nothing else.
  REQUIRE(r.host.cmds.size() == 1);
  CHECK(r.host.cmds[0][0] == "sh");
  CHECK(r.host.cmds[0][4] == p);
}

TEST_CASE(
    "proxy path: a chunked answer comes whole, one framed by its close comes whole, one cut "
    "short comes cut, a 204 has no body",
    "[opensandbox][port-proxy]") {
  app a;
  rig r;
  const auto p = std::to_string(a.port);
  recording chunked, closed, cut, none;
  CHECK(r.call(chunked, "GET", p + "/chunked").streamed);
  CHECK(chunked.text == "hello world");
  CHECK(r.call(closed, "GET", p + "/close").streamed);
  CHECK(closed.text == "until close");
  CHECK(closed.type == "text/plain");
  auto c = r.call(cut, "GET", p + "/cut");
  CHECK(cut.status == 200);
  CHECK(cut.text == "only ten..");
  CHECK(!c.streamed);  // the server closes without the last chunk: the client sees it cut
  auto n = r.call(none, "GET", p + "/none");
  CHECK(n.status == 204);
  CHECK(!n.streamed);
  CHECK(!none.opened());
}

TEST_CASE(
    "proxy path without python3 in the image: bash's /dev/tcp relays, and with neither python3, "
    "bash nor nc: 502 PROXY::NO_RELAY",
    "[opensandbox][port-proxy]") {
  app a;
  rig r;
  const auto bin =
      std::filesystem::temp_directory_path() / ("dg-relay-bin-" + std::to_string(::getpid()));
  std::filesystem::remove_all(bin);
  std::filesystem::create_directories(bin / "sh-only");
  for (const char* tool : {"sh", "bash", "cat"})
    std::filesystem::create_symlink(std::string("/bin/") + tool, bin / tool);
  std::filesystem::create_symlink("/bin/sh", bin / "sh-only" / "sh");
  r.host.path = bin.string();
  recording out;
  auto reply = r.call(out, "GET", std::to_string(a.port) + "/echo");
  CHECK(reply.streamed);
  CHECK(out.status == 200);
  CHECK(out.text.find(R"("path": "/echo")") != std::string::npos);

  r.host.path = (bin / "sh-only").string();
  recording none;
  auto refused = r.call(none, "GET", std::to_string(a.port) + "/echo");
  CHECK(refused.status == 502);
  CHECK(refused.body.find(R"("code":"PROXY::NO_RELAY")") != std::string::npos);
  std::filesystem::remove_all(bin);
}

TEST_CASE(
    "proxy path refusals: nothing listening 502, not a port 400, a paused sandbox 409, no "
    "token 401 and no relay started",
    "[opensandbox][port-proxy]") {
  rig r;
  recording out;
  std::uint16_t closed_port = 0;
  {
    app gone;
    closed_port = gone.port;
  }
  auto refused = r.call(out, "GET", std::to_string(closed_port) + "/");
  CHECK(refused.status == 502);
  CHECK(refused.body.find(R"("code":"PROXY::CONNECT_FAILED")") != std::string::npos);
  const auto relays = r.host.cmds.size();
  for (const char* bad : {"0", "65536", "8a", "+80", "123456"}) {
    auto b = r.call(out, "GET", std::string(bad) + "/");
    CHECK(b.status == 400);
    CHECK(b.body.find(R"("code":"PROXY::INVALID_PORT")") != std::string::npos);
  }
  r.s->paused = true;
  CHECK(r.call(out, "GET", "8080/").status == 409);
  r.s->paused = false;
  http_request anonymous;
  anonymous.method = "GET";
  anonymous.path = "/v1/sandboxes/" + sbx + "/proxy/8080/";
  CHECK(opensandbox::serve(*r.core, anonymous).status == 401);
  CHECK(r.host.cmds.size() == relays);  // none of these reached the sandbox
  CHECK(!out.opened());
}

TEST_CASE(
    "proxy path: a WebSocket upgrade gets the app's 101 and the two connections joined both "
    "ways until the client ends",
    "[opensandbox][port-proxy]") {
  app a;
  rig r;
  recording out;
  std::string echoed;
  out.client = [&](int fd) {
    send_all(fd, "hello");
    char buf[256];
    while (echoed.size() < 11) {  // "EARLY HELLO": what came before, then this
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) break;
      echoed.append(buf, static_cast<std::size_t>(n));
    }
    ::shutdown(fd, SHUT_WR);  // the client's end
  };
  const auto begun = std::chrono::steady_clock::now();
  auto reply = r.call(out, "GET", std::to_string(a.port) + "/ws", {}, {},
                      {{"upgrade", "websocket"}, {"sec-websocket-key", "dGhlIHNhbXBsZQ=="}});
  CHECK(reply.status == 101);
  CHECK(out.status == 101);
  CHECK(field(out.fields, "Upgrade") == "websocket");
  CHECK(field(out.fields, "Connection") == "Upgrade");
  CHECK(field(out.fields, "X-Seen") == "dGhlIHNhbXBsZQ==");  // the app saw the client's key
  out.client_thread.join();
  CHECK(echoed == "EARLY HELLO");
  // Ended by the client's end, not by a timeout.
  CHECK(std::chrono::steady_clock::now() - begun < std::chrono::seconds(20));
}
