#pragma once
// Many long-lived streams held open at once (`GET /events`: chunked, never ends), to see
// what each one costs the process relaying it. One thread, epoll, non-blocking sockets.

#include <chrono>
#include <string>
#include <vector>

#include "dockgate/common/endpoint.hpp"

namespace dockgate::bench {

class held_streams {
 public:
  held_streams(const common::endpoint& ep, std::string request);
  ~held_streams();  // closes every connection
  held_streams(const held_streams&) = delete;
  held_streams& operator=(const held_streams&) = delete;

  // Opens connections until `count` of them have a 200 response head, or until none has
  // arrived for `stall` (a relay at its connection limit leaves the rest in its accept
  // queue). Connections that fail are counted, not retried.
  void hold(int count, std::chrono::milliseconds stall);

  int held() const { return held_; }
  int failed() const { return failed_; }

 private:
  struct connection {
    int fd = -1;
    std::string buf;
    bool sent = false;
  };
  bool open_one();  // false when the listener's backlog is full
  void on_event(std::size_t index, unsigned events);
  void finish(connection& c, bool ok);

  common::endpoint ep_;
  std::string request_;
  int epoll_fd_;
  std::vector<connection> connections_;
  int held_ = 0;
  int failed_ = 0;
};

}  // namespace dockgate::bench
