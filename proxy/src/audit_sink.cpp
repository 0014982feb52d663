#include "audit_sink.hpp"

#include <unistd.h>

#include <cerrno>

namespace dockgate::proxy {

void audit_sink::write(const audit_record& r) {
  append_audit(pending_, r);
  pending_ += '\n';
  if (pending_.size() >= flush_at) flush();
}

void audit_sink::flush() {
  std::size_t done = 0;
  while (done < pending_.size() && !failed_) {
    const ssize_t n = ::write(fd_, pending_.data() + done, pending_.size() - done);
    if (n > 0) {
      done += static_cast<std::size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      failed_ = true;  // stdout gone: the lines are counted in metrics still
    }
  }
  pending_.clear();
  if (pending_.capacity() > 2 * flush_at) pending_.shrink_to_fit();
}

}  // namespace dockgate::proxy
