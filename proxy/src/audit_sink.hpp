#pragma once
// Where audit lines go: one JSON line per request on a file descriptor (stdout).
//
// Lines are batched: a line is appended to a buffer and the buffer is written when the
// event loop has run every handler that was ready (a post), or at once past 64 KiB. Under
// load one write(2) carries many lines; an idle proxy writes a line within the same loop
// turn that finished its request, with no added delay. flush() writes what is left; the
// proxy calls it when it stops, after its last connection has ended, so a clean shutdown
// loses no line. A crash can lose the lines of the loop turn it happens in.

#include <string>

#include "dockgate/proxy/audit.hpp"
#include "net.hpp"

namespace dockgate::proxy {

class audit_sink {
 public:
  audit_sink(int fd, net::any_io_executor executor) : fd_(fd), executor_(std::move(executor)) {}
  audit_sink(const audit_sink&) = delete;
  audit_sink& operator=(const audit_sink&) = delete;
  ~audit_sink() { flush(); }

  void write(const audit_record& r);
  void flush();

 private:
  static constexpr std::size_t flush_at = 64 * 1024;
  int fd_;
  net::any_io_executor executor_;
  std::string pending_;
  bool flush_posted_ = false;
  bool failed_ = false;
};

}  // namespace dockgate::proxy
