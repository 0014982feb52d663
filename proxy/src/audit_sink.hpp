#pragma once
// Where audit lines go: one JSON line per request on a file descriptor (stdout).
//
// Lines are batched: a line is appended to a buffer, and the buffer is written once a
// second (the proxy's watchdog tick calls flush()), at once past 64 KiB, and when the
// proxy stops cleanly, after its last connection has ended: a clean shutdown loses no
// line, and no request pays a write(2) of its own. A line reaches its destination at
// most about a second after its response went out; a crash can lose that last second.

#include <string>

#include "dockgate/proxy/audit.hpp"

namespace dockgate::proxy {

class audit_sink {
 public:
  explicit audit_sink(int fd) : fd_(fd) {}
  audit_sink(const audit_sink&) = delete;
  audit_sink& operator=(const audit_sink&) = delete;
  ~audit_sink() { flush(); }

  void write(const audit_record& r);
  void flush();

 private:
  static constexpr std::size_t flush_at = 64 * 1024;
  int fd_;
  std::string pending_;
  bool failed_ = false;
};

}  // namespace dockgate::proxy
