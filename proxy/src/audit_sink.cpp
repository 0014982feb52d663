// The fan-out of audit lines to their sinks, and each sink's queue (audit_sink.hpp).
#include "audit_sink.hpp"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include "audit_outputs.hpp"

namespace dockgate::proxy {

void audit_output::add(const audit_record& r, std::string_view line) {
  if (queue_.size() > max_queued) {
    ++lost_;
    lost_bytes_ += line.size() + 1;  // the JSON line and its newline (the file's encoding)
    return;
  }
  encode(queue_, r, line);
  ends_.push_back(queue_.size());
}

bool audit_output::flush() {
  if (queue_.empty()) return true;
  const std::size_t done = write(queue_, ends_);
  up_ = done == queue_.size();
  if (!up_) ++write_errors_;
  if (done == 0) return false;
  queue_.erase(0, done);
  std::size_t whole = 0;
  while (whole < ends_.size() && ends_[whole] <= done) ++whole;
  ends_.erase(ends_.begin(), ends_.begin() + static_cast<std::ptrdiff_t>(whole));
  for (auto& e : ends_) e -= done;
  if (queue_.capacity() > 4 * max_queued / 16 && queue_.size() < max_queued / 64)
    queue_.shrink_to_fit();
  return queue_.empty();
}

audit_sink_health audit_output::health() const {
  return {name_, up_, queue_.size(), ends_.size(), lost_, lost_bytes_, write_errors_};
}

std::vector<audit_sink_health> audit_sink::health() {
  const std::lock_guard lock(mutex_);
  std::vector<audit_sink_health> out;
  out.reserve(outputs_.size());
  for (const auto& o : outputs_) out.push_back(o->health());
  return out;
}

bool audit_sink::write(const audit_record& r) {
  thread_local std::string line;  // made before the lock: threads wait only for the queues
  line.clear();
  append_audit(line, r);
  const std::lock_guard lock(mutex_);
  for (auto& o : outputs_) o->add(r, line);
  since_flush_ += line.size();
  if (blocking_ || since_flush_ >= flush_at) return flush_locked();
  return true;
}

bool audit_sink::flush() {
  const std::lock_guard lock(mutex_);
  return flush_locked();
}

bool audit_sink::flush_locked() {
  since_flush_ = 0;
  failing_.resize(outputs_.size(), false);
  reported_lost_.resize(outputs_.size(), 0);
  bool all = true;
  for (std::size_t i = 0; i < outputs_.size(); ++i) {
    auto& o = *outputs_[i];
    const bool ok = o.flush();
    all = all && ok;
    if (ok != !failing_[i]) {
      if (ok)
        log_.info("audit sink {}: written again", o.name());
      else
        log_.error("audit sink {}: cannot write ({}): {} byte(s) kept for a later attempt",
                   o.name(), o.last_error, o.queued());
      failing_[i] = !ok;
    }
    if (o.lost() != reported_lost_[i])
      reported_lost_[i] = o.lost(),
      log_.error("audit sink {}: {} line(s) lost in all (its queue is full)", o.name(), o.lost());
  }
  return all;
}

void audit_sink::reopen() {
  const std::lock_guard lock(mutex_);
  flush_locked();
  for (auto& o : outputs_) {
    const std::string error = o->reopen();
    if (!error.empty()) log_.error("SIGHUP: audit sink {}: {}", o->name(), error);
  }
}

}  // namespace dockgate::proxy

namespace dockgate::proxy {

std::unique_ptr<audit_output> open_audit_output(const audit_target& t, const serve_options& o,
                                                std::string& error) {
  switch (t.type) {
    case audit_target::kind::standard_output:
      return open_fd_output(STDOUT_FILENO, t.spec);
    case audit_target::kind::file:
      return open_file_output(t, o.audit_max_bytes, o.audit_keep, error);
    case audit_target::kind::journald:
      return open_journald_output(t, error);
    case audit_target::kind::syslog:
      return open_syslog_output(t, error);
  }
  error = "unknown sink";
  return nullptr;
}

}  // namespace dockgate::proxy
