#include "dockgate/proxy/metrics.hpp"

#include <cstdio>

namespace dockgate::proxy {

void metrics::record(std::string_view profile, std::string_view operation, bool denied,
                     unsigned status, std::string_view rule, double seconds) {
  if (profile.empty()) profile = "none";
  if (operation.empty()) operation = "unrouted";
  ++slot(slot(requests_, profile), operation)[outcome{denied, status}];
  if (denied) ++slot(slot(refusals_, profile), rule.empty() ? std::string_view("unknown") : rule);
  for (std::size_t i = 0; i < buckets.size(); ++i)
    if (seconds <= buckets[i]) ++bucket_counts_[i];
  ++count_;
  sum_ += seconds;
}

void metrics::add(const metrics& other) {
  for (const auto& [profile, operations] : other.requests_)
    for (const auto& [op, outcomes] : operations)
      for (const auto& [o, n] : outcomes) slot(slot(requests_, profile), op)[o] += n;
  for (const auto& [profile, rules] : other.refusals_)
    for (const auto& [rule, n] : rules) slot(slot(refusals_, profile), rule) += n;
  for (std::size_t i = 0; i < buckets.size(); ++i) bucket_counts_[i] += other.bucket_counts_[i];
  count_ += other.count_;
  sum_ += other.sum_;
  upstream_errors_ += other.upstream_errors_;
  streams_ += other.streams_;
  hijacks_ += other.hijacks_;
  connections_ += other.connections_;
}

std::string metrics::render() const {
  std::string out;
  char num[64];
  auto label_value = [](std::string_view v) {  // escape \ " and newlines, as the format asks
    std::string o;
    for (char c : v) {
      if (c == '\\' || c == '"') o += '\\';
      if (c == '\n') {
        o += "\\n";
        continue;
      }
      o += c;
    }
    return o;
  };
  out +=
      "# HELP dockgate_requests_total Requests by profile, Engine API operation, verdict and "
      "status.\n";
  out += "# TYPE dockgate_requests_total counter\n";
  for (const auto& [profile, operations] : requests_)
    for (const auto& [op, outcomes] : operations)
      for (const auto& [o, n] : outcomes)
        out += "dockgate_requests_total{profile=\"" + label_value(profile) + "\",operation=\"" +
               label_value(op) + "\",verdict=\"" + (o.denied ? "deny" : "allow") + "\",status=\"" +
               std::to_string(o.status) + "\"} " + std::to_string(n) + "\n";
  out +=
      "# HELP dockgate_refusals_total Refused requests by profile and the rule that refused "
      "them.\n";
  out += "# TYPE dockgate_refusals_total counter\n";
  for (const auto& [profile, rules] : refusals_)
    for (const auto& [rule, n] : rules)
      out += "dockgate_refusals_total{profile=\"" + label_value(profile) + "\",rule=\"" +
             label_value(rule) + "\"} " + std::to_string(n) + "\n";
  out +=
      "# HELP dockgate_request_duration_seconds Time from the request head to the end of the "
      "answer.\n";
  out += "# TYPE dockgate_request_duration_seconds histogram\n";
  for (std::size_t i = 0; i < buckets.size(); ++i) {
    std::snprintf(num, sizeof num, "%g", buckets[i]);
    out += std::string("dockgate_request_duration_seconds_bucket{le=\"") + num + "\"} " +
           std::to_string(bucket_counts_[i]) + "\n";
  }
  out += "dockgate_request_duration_seconds_bucket{le=\"+Inf\"} " + std::to_string(count_) + "\n";
  std::snprintf(num, sizeof num, "%.6f", sum_);
  out += std::string("dockgate_request_duration_seconds_sum ") + num + "\n";
  out += "dockgate_request_duration_seconds_count " + std::to_string(count_) + "\n";
  out += "# HELP dockgate_open_streams Responses streaming to clients now (events, logs, pulls).\n";
  out += "# TYPE dockgate_open_streams gauge\ndockgate_open_streams " + std::to_string(streams_) +
         "\n";
  out += "# HELP dockgate_open_hijacks Hijacked attach and exec sessions now.\n";
  out += "# TYPE dockgate_open_hijacks gauge\ndockgate_open_hijacks " + std::to_string(hijacks_) +
         "\n";
  out +=
      "# HELP dockgate_connections Client connections served now (dockgate_connection_limit: at "
      "most).\n";
  out += "# TYPE dockgate_connections gauge\ndockgate_connections " + std::to_string(connections_) +
         "\n";
  out += "# HELP dockgate_connection_limit Client connections served at most (more wait).\n";
  out += "# TYPE dockgate_connection_limit gauge\ndockgate_connection_limit " +
         std::to_string(connection_limit_) + "\n";
  out += "# HELP dockgate_policy_reloads_total SIGHUP reloads, applied or refused (policy kept).\n";
  out += "# TYPE dockgate_policy_reloads_total counter\n";
  out += "dockgate_policy_reloads_total{result=\"success\"} " + std::to_string(reloads_ok_) + "\n";
  out +=
      "dockgate_policy_reloads_total{result=\"failure\"} " + std::to_string(reloads_failed_) + "\n";
  out += "# HELP dockgate_policy_last_reload_successful 1 if the last policy load applied.\n";
  out += "# TYPE dockgate_policy_last_reload_successful gauge\n";
  out +=
      std::string("dockgate_policy_last_reload_successful ") + (last_reload_ok_ ? "1" : "0") + "\n";
  out +=
      "# HELP dockgate_policy_last_reload_success_timestamp_seconds When the policy in force "
      "was loaded.\n";
  out += "# TYPE dockgate_policy_last_reload_success_timestamp_seconds gauge\n";
  std::snprintf(num, sizeof num, "%.3f", last_load_time_);
  out += std::string("dockgate_policy_last_reload_success_timestamp_seconds ") + num + "\n";
  out += "# HELP dockgate_daemon_up 1 if the daemon answered a ping at this scrape.\n";
  out += "# TYPE dockgate_daemon_up gauge\n";
  out += std::string("dockgate_daemon_up ") + (daemon_up_ ? "1" : "0") + "\n";
  out +=
      "# HELP dockgate_upstream_errors_total Requests the daemon could not be reached for or that "
      "lost it.\n";
  out += "# TYPE dockgate_upstream_errors_total counter\ndockgate_upstream_errors_total " +
         std::to_string(upstream_errors_) + "\n";
  // The audit sinks: one series each, labelled with its --audit value.
  auto per_sink = [&](std::string_view header, std::string_view name, auto value) {
    out += header;
    for (const auto& s : audit_sinks_)
      out += std::string(name) + "{sink=\"" + label_value(s.sink) + "\"} " +
             std::to_string(value(s)) + "\n";
  };
  per_sink(
      "# HELP dockgate_audit_sink_up 1 if the audit sink took every line at its last write, 0 "
      "while lines wait in memory for it.\n# TYPE dockgate_audit_sink_up gauge\n",
      "dockgate_audit_sink_up", [](const audit_sink_health& s) { return s.up ? 1 : 0; });
  per_sink(
      "# HELP dockgate_audit_sink_pending_bytes Audit bytes held in memory for the sink, not yet "
      "written (past 16 MiB its new lines are lost).\n"
      "# TYPE dockgate_audit_sink_pending_bytes gauge\n",
      "dockgate_audit_sink_pending_bytes",
      [](const audit_sink_health& s) { return s.pending_bytes; });
  per_sink(
      "# HELP dockgate_audit_sink_pending_lines Audit lines held in memory for the sink, not yet "
      "written.\n# TYPE dockgate_audit_sink_pending_lines gauge\n",
      "dockgate_audit_sink_pending_lines",
      [](const audit_sink_health& s) { return s.pending_lines; });
  per_sink(
      "# HELP dockgate_audit_sink_lost_lines_total Audit lines the sink never gets: they came "
      "while its queue was full.\n# TYPE dockgate_audit_sink_lost_lines_total counter\n",
      "dockgate_audit_sink_lost_lines_total",
      [](const audit_sink_health& s) { return s.lost_lines; });
  per_sink(
      "# HELP dockgate_audit_sink_lost_bytes_total Bytes of the audit lines the sink never gets "
      "(each JSON line and its newline).\n# TYPE dockgate_audit_sink_lost_bytes_total counter\n",
      "dockgate_audit_sink_lost_bytes_total",
      [](const audit_sink_health& s) { return s.lost_bytes; });
  per_sink(
      "# HELP dockgate_audit_sink_write_errors_total Writes to the sink that left lines queued "
      "(a full disk, a removed file, a collector gone).\n"
      "# TYPE dockgate_audit_sink_write_errors_total counter\n",
      "dockgate_audit_sink_write_errors_total",
      [](const audit_sink_health& s) { return s.write_errors; });
  return out;
}

}  // namespace dockgate::proxy
