#include "harness.hpp"

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace dockgate::test {

namespace {

std::string env_or_throw(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v)
    throw std::runtime_error(std::string(name) + " is not set: run the tests with scripts/test.sh");
  return v;
}

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'')
      out += "'\\''";
    else
      out += c;
  }
  return out + "'";
}

}  // namespace

int connect_unix(const std::string& path) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

std::string engine_host() {
  return env_or_throw("DOCKGATE_TEST_ENGINE");
}
std::string engine_socket() {
  auto h = engine_host();
  return h.substr(std::strlen("unix://"));
}
std::string registry() {
  return env_or_throw("DOCKGATE_TEST_REGISTRY");
}
std::string test_image() {
  return env_or_throw("DOCKGATE_TEST_IMAGE");
}
std::string docker_cli() {
  const char* v = std::getenv("DOCKGATE_TEST_DOCKER_CLI");
  return v && *v ? v : "/usr/bin/docker";
}
std::string repo_root() {
  return DOCKGATE_SOURCE_DIR;
}

std::string proxy_bin() {
  const char* v = std::getenv("DOCKGATE_TEST_PROXY_BIN");
  return v && *v ? v : DOCKGATE_PROXY_BIN;
}

std::string unique_name(const std::string& prefix) {
  static std::mt19937_64 rng{std::random_device{}()};
  std::ostringstream s;
  s << prefix << '-' << std::hex << (rng() & 0xffffffffffULL);
  return s.str();
}

std::string free_tcp_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return std::to_string(ntohs(a.sin_port));
}

command_result run(const std::string& command) {
  command_result r;
  FILE* p = ::popen((command + " 2>&1").c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf;
  std::size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) r.output.append(buf.data(), n);
  int status = ::pclose(p);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

proxy_process::proxy_process(const std::string& policy, std::vector<std::string> extra_args,
                             std::vector<std::string> env, std::string upstream) {
  char tmpl[] = "/tmp/dockgate-it.XXXXXX";
  if (!::mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
  dir_ = tmpl;
  socket_ = dir_ + "/proxy.sock";
  std::string policy_path = policy;
  if (!policy.empty() && policy.front() == '{') {
    policy_path = dir_ + "/policy.json";
    std::ofstream(policy_path) << policy;
  } else if (!policy.empty()) {
    // A copy in this root-owned directory: the gate reads only files root controls, and
    // a checkout may belong to the user who made it.
    policy_path = dir_ + "/policy.json";
    std::ifstream in(repo_root() + "/" + policy, std::ios::binary);
    if (!in) throw std::runtime_error("cannot read " + policy);
    std::ofstream(policy_path, std::ios::binary) << in.rdbuf();
  }
  std::vector<std::string> args = {proxy_bin(), "--upstream",
                                   upstream.empty() ? engine_host() : upstream, "--listen",
                                   "unix://" + socket_};
  if (!policy.empty())
    args.insert(args.end(), {"--policy", policy_path});  // else: Tecnativa's variables
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  const std::string out_path = dir_ + "/audit.log";
  const std::string err_path = dir_ + "/proxy.err";
  pid_ = ::fork();
  if (pid_ == 0) {
    int out = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int err = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ::dup2(out, 1);
    ::dup2(err, 2);
    for (auto& e : env) ::putenv(e.data());
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  // Bounded wait until the socket accepts.
  for (int i = 0; i < 200; ++i) {
    int fd = connect_unix(socket_);
    if (fd >= 0) {
      ::close(fd);
      return;
    }
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      std::ifstream e(err_path);
      std::stringstream text;
      text << e.rdbuf();
      run("rm -rf " + shell_quote(dir_));  // the destructor does not run for a throwing constructor
      throw std::runtime_error("dockgate-proxy exited at start-up: " + text.str());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  terminate();
  run("rm -rf " + shell_quote(dir_));
  throw std::runtime_error("dockgate-proxy did not start listening");
}

std::pair<int, std::chrono::milliseconds> proxy_process::terminate() {
  if (pid_ <= 0) return {-1, {}};
  auto start = std::chrono::steady_clock::now();
  ::kill(pid_, SIGTERM);
  int status = 0;
  for (int i = 0; i < 400; ++i) {
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      auto took = std::chrono::duration_cast<std::chrono::milliseconds>(
          std::chrono::steady_clock::now() - start);
      return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, took};
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, &status, 0);
  pid_ = -1;
  return {-1, std::chrono::milliseconds(10000)};
}

proxy_process::~proxy_process() {
  terminate();
  // Every audit line a test's gate wrote matches docs/audit.schema.json (the JSON Schema
  // validator of python3-jsonschema, through scripts/check-audit-log.py): each test that
  // starts a gate checks the lines its requests produced.
  if (std::uncaught_exceptions() == 0 && !audit_log().empty()) {
    const auto checked =
        run("/usr/bin/python3 " + shell_quote(repo_root() + "/scripts/check-audit-log.py") + " " +
            shell_quote(repo_root() + "/docs/audit.schema.json") + " " +
            shell_quote(dir_ + "/audit.log") + " 2>&1");
    if (checked.status != 0)
      FAIL_CHECK("audit lines outside docs/audit.schema.json:\n" << checked.output);
  }
  // DOCKGATE_KEEP_PROXY_LOGS=DIR: the audit log and stderr of every proxy a test started
  // are kept there, for a failure to be read afterwards.
  if (const char* keep = std::getenv("DOCKGATE_KEEP_PROXY_LOGS"); keep && *keep)
    run("cp -r " + shell_quote(dir_) + " " + shell_quote(keep) + "/ 2>/dev/null");
  run("rm -rf " + shell_quote(dir_));
}

std::string proxy_process::audit_log() const {
  std::ifstream in(dir_ + "/audit.log");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

bool proxy_process::audit_contains(const std::string& text,
                                   std::chrono::milliseconds timeout) const {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (audit_log().find(text) == std::string::npos) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

unsigned raw_response::status() const {
  if (bytes.size() < 12 || bytes.compare(0, 7, "HTTP/1.") != 0) return 0;
  return static_cast<unsigned>(std::atoi(bytes.substr(9, 3).c_str()));
}

unsigned raw_response::count() const {
  // Walks the responses by their framing (Content-Length or chunked; HEAD answers and
  // refusals here carry Content-Length), so body text never counts as a status line.
  unsigned n = 0;
  std::size_t pos = 0;
  while (bytes.compare(pos, 7, "HTTP/1.") == 0) {
    ++n;
    const auto head_end = bytes.find("\r\n\r\n", pos);
    if (head_end == std::string::npos) break;
    std::string head = bytes.substr(pos, head_end - pos);
    for (auto& c : head) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    pos = head_end + 4;
    const bool no_body =
        head.find(" 204 ") != std::string::npos || head.find(" 304 ") != std::string::npos;
    if (auto cl = head.find("\r\ncontent-length:"); cl != std::string::npos && !no_body) {
      const std::size_t len = std::strtoull(head.c_str() + cl + 17, nullptr, 10);
      // A HEAD answer has Content-Length but no body: the next response starts right here.
      if (bytes.compare(pos, 7, "HTTP/1.") != 0) pos += len;
    } else if (head.find("transfer-encoding: chunked") != std::string::npos) {
      for (;;) {
        const auto eol = bytes.find("\r\n", pos);
        if (eol == std::string::npos) return n;
        const std::size_t size = std::strtoull(bytes.c_str() + pos, nullptr, 16);
        pos = eol + 2 + size + 2;
        if (size == 0) break;
      }
    }
  }
  return n;
}

raw_response raw_exchange(const std::string& socket_path, const std::string& request,
                          bool shutdown_write, std::chrono::milliseconds timeout) {
  raw_response r;
  int fd = connect_unix(socket_path);
  if (fd < 0) throw std::runtime_error("cannot connect to " + socket_path);
  std::size_t sent = 0;
  while (sent < request.size()) {
    ssize_t n = ::send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;  // the proxy may close early on a refused head
    sent += static_cast<std::size_t>(n);
  }
  if (shutdown_write) ::shutdown(fd, SHUT_WR);
  std::array<char, 8192> buf;
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(timeout.count())) <= 0) break;
    ssize_t n = ::recv(fd, buf.data(), buf.size(), 0);
    if (n <= 0) {
      r.closed = true;
      break;
    }
    r.bytes.append(buf.data(), static_cast<std::size_t>(n));
  }
  ::close(fd);
  return r;
}

background::background(const std::string& command) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
  pid_ = ::fork();
  if (pid_ == 0) {
    ::setpgid(0, 0);
    ::dup2(fds[1], 1);
    ::dup2(fds[1], 2);
    ::execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::setpgid(pid_, pid_);
  ::close(fds[1]);
  fd_ = fds[0];
}

background::~background() {
  kill();
  if (fd_ >= 0) ::close(fd_);
}

std::optional<std::string> background::read_line(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (auto nl = pending_.find('\n'); nl != std::string::npos) {
      std::string line = pending_.substr(0, nl);
      pending_.erase(0, nl + 1);
      return line;
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return std::nullopt;
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) return std::nullopt;
    char buf[4096];
    ssize_t n = ::read(fd_, buf, sizeof buf);
    if (n <= 0) return std::nullopt;
    pending_.append(buf, static_cast<std::size_t>(n));
  }
}

int background::wait(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (pid_ > 0) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      status_ = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      break;
    }
    if (std::chrono::steady_clock::now() > deadline) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return status_;
}

void background::kill() {
  if (pid_ <= 0) return;
  ::kill(-pid_, SIGKILL);
  int status = 0;
  ::waitpid(pid_, &status, 0);
  pid_ = -1;
}

std::string make_pki() {
  auto dir = run("mktemp -d /tmp/dockgate-pki.XXXXXX").output;
  dir.erase(dir.find_last_not_of('\n') + 1);
  const std::string script = "cd " + dir +
                             " && "
                             "openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem "
                             "-days 1 -subj /CN=dockgate-test-ca && "
                             "printf 'subjectAltName=IP:127.0.0.1\\n' > server.ext && "
                             "openssl req -newkey rsa:2048 -nodes -keyout server.key -out "
                             "server.csr -subj /CN=127.0.0.1 && "
                             "openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key "
                             "-CAcreateserial -out server.pem -days 1 -extfile server.ext && "
                             "printf 'extendedKeyUsage=clientAuth\\n' > client.ext && "
                             "openssl req -newkey rsa:2048 -nodes -keyout client.key -out "
                             "client.csr -subj /CN=ci-runner/O=dockgate && "
                             "openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key "
                             "-CAcreateserial -out client.pem -days 1 -extfile client.ext && "
                             "cp client.pem cert.pem && cp client.key key.pem";
  if (run(script).status != 0) throw std::runtime_error("openssl failed making test certificates");
  return dir;
}

std::string root_owned_copy(const std::string& repo_path) {
  char tmpl[] = "/tmp/dockgate-policy.XXXXXX";
  if (!::mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
  const std::string copy =
      std::string(tmpl) + "/" + repo_path.substr(repo_path.find_last_of('/') + 1);
  std::ifstream in(repo_root() + "/" + repo_path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + repo_path);
  std::ofstream(copy, std::ios::binary) << in.rdbuf();
  return copy;
}

bool container_exists(const std::string& name) {
  auto r =
      run(docker_cli() + " -H " + engine_host() + " container inspect --format '{{.Id}}' " + name);
  return r.status == 0;
}

}  // namespace dockgate::test
