#pragma once
// A stand-in for the engine on a unix socket of its own, for tests that need a daemon whose
// every answer they choose (a cut answer, one sent in pieces, a connection dropped as a
// request arrives): the listener, a thread that accepts, a thread per connection running
// the test's `serve(fd, number)` (connections numbered from 1 in the order they came),
// and a teardown that ends them all. What to answer is the test's; the framing helpers
// below are what every such daemon needs.
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace dockgate::test {

class unix_daemon {
 public:
  using handler = std::function<void(int fd, int number)>;
  // The socket is made and listening when the constructor returns; `serve` runs for each
  // connection until it returns (the connection is closed by the teardown).
  explicit unix_daemon(handler serve) : serve_(std::move(serve)) {
    char dir[] = "/tmp/dg-daemon-XXXXXX";
    REQUIRE(::mkdtemp(dir) != nullptr);
    dir_ = dir;
    path_ = dir_ + "/docker.sock";
    listener_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(listener_ >= 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path_.c_str(), sizeof addr.sun_path - 1);
    REQUIRE(::bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    REQUIRE(::listen(listener_, 16) == 0);
    acceptor_ = std::thread([this] {
      for (int number = 1;; ++number) {
        const int fd = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd < 0) return;
        std::lock_guard g(m_);
        fds_.push_back(fd);
        threads_.emplace_back([this, fd, number] { serve_(fd, number); });
      }
    });
  }
  unix_daemon(const unix_daemon&) = delete;
  unix_daemon& operator=(const unix_daemon&) = delete;
  ~unix_daemon() {
    ::shutdown(listener_, SHUT_RDWR);
    acceptor_.join();
    ::close(listener_);
    {
      std::lock_guard g(m_);
      for (int fd : fds_) ::shutdown(fd, SHUT_RDWR);
    }
    for (auto& t : threads_) t.join();
    for (int fd : fds_) ::close(fd);
    std::filesystem::remove_all(dir_);
  }
  std::string upstream() const { return "unix://" + path_; }

 private:
  handler serve_;
  std::string dir_, path_;
  int listener_ = -1;
  std::thread acceptor_;
  std::mutex m_;
  std::vector<int> fds_;
  std::vector<std::thread> threads_;
};

// The next request's method and target on `fd` (its head read into `in`, the rest kept
// there for the next); nullopt when the peer closed first.
struct request_line {
  std::string method, target;
};
inline std::optional<request_line> read_request(int fd, std::string& in) {
  std::size_t end;
  char buf[4096];
  while ((end = in.find("\r\n\r\n")) == std::string::npos) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return std::nullopt;
    in.append(buf, static_cast<std::size_t>(n));
  }
  const std::string line = in.substr(0, in.find("\r\n"));
  in.erase(0, end + 4);
  request_line r;
  r.method = line.substr(0, line.find(' '));
  r.target = line.substr(r.method.size() + 1, line.rfind(' ') - r.method.size() - 1);
  return r;
}

// The calls the gate makes to learn the daemon (its API version, its cgroup version).
inline bool is_learning(const std::string& target) {
  return target == "/version" || target.ends_with("/info");
}

// A 200 answer with a JSON body, framed by Content-Length.
inline std::string json_answer(const std::string& body) {
  return "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n\r\n" + body;
}

// What the gate's learning calls get: API 1.41 of dockerd 20.10.24, cgroup v2.
inline std::string learning_answer(const std::string& target) {
  return target == "/version" ? json_answer(R"({"ApiVersion":"1.41","Version":"20.10.24"})")
                              : json_answer(R"({"CgroupVersion":"2"})");
}

// `pieces` sent one after another, 30 ms apart (so the gate reads them as separate
// arrivals); false if the peer went away.
inline bool send_pieces(int fd, const std::vector<std::string>& pieces) {
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    if (i > 0) std::this_thread::sleep_for(std::chrono::milliseconds(30));
    if (::send(fd, pieces[i].data(), pieces[i].size(), MSG_NOSIGNAL) !=
        static_cast<ssize_t>(pieces[i].size()))
      return false;
  }
  return true;
}

}  // namespace dockgate::test
