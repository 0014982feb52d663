#pragma once
// A runner (or a kernel driver) faked on the other end of a socketpair, speaking the runner's
// framing (runner.hpp, runner.py) inside Docker's stream multiplexing; fake_engine::on_attach
// hands its end to the sidecar. Shared by cells_test.cpp and opensandbox_code_test.cpp.

#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "dockgate/client/engine.hpp"

namespace dockgate::sidecar::testing {

inline std::string u32(std::uint32_t n) {
  return {static_cast<char>(n >> 24), static_cast<char>((n >> 16) & 0xff),
          static_cast<char>((n >> 8) & 0xff), static_cast<char>(n & 0xff)};
}
// A runner frame (runner.hpp): kind, length, payload.
inline std::string frame(char kind, std::string_view payload) {
  return std::string(1, kind) + u32(static_cast<std::uint32_t>(payload.size())) +
         std::string(payload);
}
// Docker's multiplexing header around `data` on stdout.
inline std::string on_stdout(std::string_view data) {
  return std::string("\x01\x00\x00\x00", 4) + u32(static_cast<std::uint32_t>(data.size())) +
         std::string(data);
}

// A runner (or kernel driver) on the other end of a socketpair: its hello, then for each
// request (runner_request's framing) what `answer` gives; an empty answer ends the stream,
// as does any answer with `end_after_answer`.
struct fake_runner {
  struct request {
    char op = 0;
    std::vector<std::vector<std::string>> lists;
  };
  std::string hello = frame('H', "dockgate-runner 2 42");
  std::function<std::string(const request&)> answer;
  bool end_after_answer = false;
  std::mutex mutex;
  std::vector<request> seen;
  std::vector<std::thread> threads;
  std::vector<int> fds;

  ~fake_runner() {
    for (int fd : fds) ::shutdown(fd, SHUT_RDWR);
    for (auto& t : threads) t.join();
    for (int fd : fds) ::close(fd);
  }
  std::vector<request> requests() {
    std::lock_guard l(mutex);
    return seen;
  }
  // More of an answer on the last stream attached, sent later than the request's answer
  // (a cell that ends when something else happens).
  void send_more(const std::string& reply) {
    const int fd = fds.back();
    for (std::size_t i = 0; i < reply.size(); i += 32768) {
      const std::string f = on_stdout(std::string_view(reply).substr(i, 32768));
      (void)!::write(fd, f.data(), f.size());
    }
  }
  // fake_engine::on_attach
  std::optional<dockgate::client::exec_stream> attach() {
    int sv[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
    fds.push_back(sv[1]);
    threads.emplace_back([this, fd = sv[1]] { serve(fd); });
    return dockgate::client::exec_stream(dockgate::client::connection::adopt(sv[0]), "",
                                         "fake-exec");
  }

 private:
  static bool read_all(int fd, std::string& out, std::size_t n) {
    out.resize(n);
    for (std::size_t got = 0; got < n;) {
      const ssize_t r = ::read(fd, out.data() + got, n - got);
      if (r <= 0) return false;
      got += static_cast<std::size_t>(r);
    }
    return true;
  }
  static std::uint32_t take_u32(std::string_view& s) {
    const auto* p = reinterpret_cast<const unsigned char*>(s.data());
    s.remove_prefix(4);
    return (std::uint32_t(p[0]) << 24) | (std::uint32_t(p[1]) << 16) | (std::uint32_t(p[2]) << 8) |
           p[3];
  }
  void serve(int fd) {
    const std::string h = on_stdout(hello);
    (void)!::write(fd, h.data(), h.size());
    for (;;) {
      std::string head, body;
      if (!read_all(fd, head, 4)) return;
      std::string_view hv(head);
      if (!read_all(fd, body, take_u32(hv))) return;
      std::string_view b(body);
      request req;
      req.op = b.front();
      b.remove_prefix(5);  // op, cap
      for (std::uint32_t lists = take_u32(b); lists; --lists) {
        req.lists.emplace_back();
        for (std::uint32_t items = take_u32(b); items; --items) {
          const auto n = take_u32(b);
          req.lists.back().emplace_back(b.substr(0, n));
          b.remove_prefix(n);
        }
      }
      std::string reply;
      {
        std::lock_guard l(mutex);
        seen.push_back(req);
      }
      reply = answer ? answer(req) : std::string();
      if (reply.empty()) {
        ::shutdown(fd, SHUT_RDWR);
        return;
      }
      for (std::size_t i = 0; i < reply.size(); i += 32768) {
        const std::string f = on_stdout(std::string_view(reply).substr(i, 32768));
        (void)!::write(fd, f.data(), f.size());
      }
      if (end_after_answer) {
        ::shutdown(fd, SHUT_RDWR);
        return;
      }
    }
  }
};

}  // namespace dockgate::sidecar::testing
