#pragma once
// Where audit lines go: every --audit sink (stdout, file:PATH, journald, syslog:ADDR), each
// an audit_output with its own queue (docs/operating.md, "Audit sinks").
//
// Invariants:
// - Batch mode (the default): a line is queued, and the queues are written once a second
//   (the watchdog tick calls flush()), at once past 64 KiB, and when the proxy stops,
//   after its last connection has ended: no request pays a system call of its own, and
//   SIGTERM or SIGHUP loses no line (SIGHUP writes the queues before it reopens files).
// - Blocking mode: write() writes to every sink before it returns, and says whether every
//   sink took the line; the request path forwards a request only when its decision line
//   was taken (request_body_stage.cpp, forward_request), else refuses it (503).
// - A line a sink could not take stays queued for that sink and is written by a later
//   flush (up to max_queued bytes per sink; past that, new lines for it are counted as
//   lost and the loss is logged): a sink that recovers receives what it missed.
// - A sink that cannot be opened at start is a start-up error (server.cpp): never a gate
//   without its audit trail.
// - Each sink's health is on /metrics (audit_sink::health, metrics.hpp): down since a write
//   left lines queued, the bytes and lines held in memory, the lines and bytes lost, and
//   the failed writes, so that an outage (a full disk in batch mode) is seen before its
//   queue is full (compose/monitoring/alerts.yml: DockgateAuditSinkDown).
// - The gate's threads share one audit_sink: write, flush and reopen hold its mutex, so a
//   connection's lines keep their order and the lines of two threads never interleave.

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "dockgate/proxy/audit.hpp"
#include "dockgate/proxy/metrics.hpp"
#include "dockgate/proxy/options.hpp"

namespace spdlog {
class logger;
}

namespace dockgate::proxy {

// One sink: its encoding of a line (a JSON line, a journal entry, an RFC 5424 message)
// and how queued messages are written.
class audit_output {
 public:
  explicit audit_output(std::string name) : name_(std::move(name)) {}
  virtual ~audit_output() = default;
  audit_output(const audit_output&) = delete;
  audit_output& operator=(const audit_output&) = delete;

  void add(const audit_record& r, std::string_view line);
  // Writes the queue; false if some of it is still queued (the sink could not take it).
  bool flush();
  // SIGHUP: a file is opened again at its path; empty, or what went wrong.
  virtual std::string reopen() { return {}; }
  const std::string& name() const { return name_; }
  std::size_t queued() const { return queue_.size(); }
  std::uint64_t lost() const { return lost_; }
  // What /metrics says of this sink.
  audit_sink_health health() const;
  std::string last_error;  // why the last flush failed

 protected:
  virtual void encode(std::string& out, const audit_record& r, std::string_view line) = 0;
  // Writes messages of `bytes` (message i ends at ends[i]); returns how many bytes, from
  // the front, were written (whole messages for datagram sinks).
  virtual std::size_t write(std::string_view bytes, std::span<const std::size_t> ends) = 0;

 private:
  static constexpr std::size_t max_queued = 16u << 20;
  std::string name_;
  std::string queue_;
  std::vector<std::size_t> ends_;
  std::uint64_t lost_ = 0;
  std::uint64_t lost_bytes_ = 0;
  std::uint64_t write_errors_ = 0;
  bool up_ = true;  // the last write took all that was queued
};

// Opens one --audit sink; nullptr and `error` set when it cannot be opened.
std::unique_ptr<audit_output> open_audit_output(const audit_target& t, const serve_options& o,
                                                std::string& error);

class audit_sink {
 public:
  audit_sink(std::vector<std::unique_ptr<audit_output>> outputs, bool blocking, spdlog::logger& log)
      : outputs_(std::move(outputs)), blocking_(blocking), log_(log) {}
  audit_sink(const audit_sink&) = delete;
  audit_sink& operator=(const audit_sink&) = delete;
  ~audit_sink() { flush(); }

  // Batch: queued. Blocking: written to every sink now; false if a sink could not take it.
  bool write(const audit_record& r);
  bool flush();
  // SIGHUP: the queues written, then files opened again at their paths (logrotate).
  void reopen();
  bool blocking() const { return blocking_; }
  // Every sink's health, in --audit order (for /metrics).
  std::vector<audit_sink_health> health();

 private:
  bool flush_locked();

  static constexpr std::size_t flush_at = 64 * 1024;
  std::mutex mutex_;  // over everything below
  std::vector<std::unique_ptr<audit_output>> outputs_;
  std::vector<bool> failing_;  // what was last logged of each sink
  std::vector<std::uint64_t> reported_lost_;
  bool blocking_;
  spdlog::logger& log_;
  std::size_t since_flush_ = 0;
};

}  // namespace dockgate::proxy
