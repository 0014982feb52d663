#pragma once
// What the connections of one gate thread share (a shard: server.cpp). Each thread has its
// own proxy_context, touched only by that thread; what the threads share is const (the
// options, a policy), thread-safe (the audit sink, the logger) or atomic (the count of
// open connections). Another thread reaches a shard by posting to its io_context.

#include <spdlog/logger.h>

#include <atomic>
#include <boost/asio/steady_timer.hpp>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "audit_sink.hpp"
#include "buffer_pool.hpp"
#include "daemon_facts.hpp"
#include "dockgate/http/request_head.hpp"
#include "dockgate/policy/body_review.hpp"
#include "dockgate/policy/policy_file.hpp"
#include "dockgate/policy/route.hpp"
#include "dockgate/proxy/metrics.hpp"
#include "dockgate/proxy/options.hpp"
#include "mapped.hpp"
#include "net.hpp"
#include "upstream_pool.hpp"

namespace dockgate::proxy {

class connection;
class events_hub;            // events_hub.hpp
struct upstream_tls_config;  // upstream_tls.hpp

// The process's daemon_facts, one fact for every thread: a thread learns or forgets them
// under the lock, and reads its own copy, brought up to date when `changes_` has moved
// (one atomic load per request).
class shared_daemon_facts {
 public:
  void refresh(daemon_facts& copy, std::uint64_t& seen) {
    if (changes_.load(std::memory_order_acquire) == seen) return;
    const std::lock_guard lock(mutex_);
    copy = facts_;
    seen = changes_.load(std::memory_order_relaxed);
  }
  // How many times the facts were forgotten: read before asking the daemon.
  std::uint64_t forgets() {
    const std::lock_guard lock(mutex_);
    return forgets_;
  }
  // Publishes `f`, unless the facts were forgotten since `forgets_before` (the daemon went
  // away while it was asked: `f` may be the old daemon's). True if published and new to
  // the process (the one who learned them says so).
  bool learned(const daemon_facts& f, std::uint64_t forgets_before) {
    const std::lock_guard lock(mutex_);
    if (forgets_ != forgets_before) return false;
    const bool news = facts_.api_version != f.api_version || facts_.cgroup_v1 != f.cgroup_v1;
    facts_ = f;
    changes_.fetch_add(1, std::memory_order_release);
    return news;
  }
  // True if there was something to forget.
  bool forget() {
    const std::lock_guard lock(mutex_);
    const bool had = facts_.api_version.has_value();
    facts_ = {};
    ++forgets_;
    changes_.fetch_add(1, std::memory_order_release);
    return had;
  }

 private:
  std::mutex mutex_;
  daemon_facts facts_;
  std::uint64_t forgets_ = 0;
  std::atomic<std::uint64_t> changes_{0};
};

// What the threads share besides the options, the logger and the audit sink.
struct process_state {
  std::atomic<std::size_t> open_connections{0};  // one per connection_slot
  // Descriptors the connections and shared events streams hold or may hold (each
  // connection_slot's, one per events_hub): the accept loop keeps it within the budget.
  std::atomic<std::size_t> descriptors{0};
  shared_daemon_facts daemon;
};

// One of the process's max_connections: taken when a client is accepted, given back when
// its connection (or its TLS handshake) ends, on whichever thread that is. It holds the
// descriptors the connection may use of the process's budget (process_state::descriptors):
// its client's and its socket to the daemon (three for a tls:// upstream), until it holds
// a shared events stream with its client's only (client_only()).
class connection_slot {
 public:
  connection_slot(process_state& process, std::uint32_t per_connection)
      : process_(&process), held_(per_connection) {
    process.open_connections.fetch_add(1, std::memory_order_relaxed);
    process.descriptors.fetch_add(per_connection, std::memory_order_relaxed);
  }
  connection_slot(connection_slot&& o) noexcept : process_(o.process_), held_(o.held_) {
    o.process_ = nullptr;
  }
  connection_slot& operator=(connection_slot&&) = delete;
  ~connection_slot() {
    if (!process_) return;
    process_->open_connections.fetch_sub(1, std::memory_order_relaxed);
    process_->descriptors.fetch_sub(held_, std::memory_order_relaxed);
  }
  // The connection will hold no socket to the daemon again (a shared events stream, which
  // ends with the connection): only its client's descriptor stays counted.
  void client_only() noexcept {
    if (!process_ || held_ <= 1) return;
    process_->descriptors.fetch_sub(held_ - 1, std::memory_order_relaxed);
    held_ = 1;
  }

 private:
  process_state* process_;
  std::uint32_t held_;
};

struct proxy_context {
  proxy_context(const serve_options& o, std::shared_ptr<const policy::policy> p,
                protocol::endpoint u, std::shared_ptr<spdlog::logger> l, audit_sink& a,
                process_state& shared)
      : options(o),
        policy(std::move(p)),
        upstream(std::move(u)),
        log(std::move(l)),
        audit(a),
        process(shared) {}

  const serve_options& options;
  // The policy new requests are decided by; SIGHUP replaces it whole (a request holds the
  // one it started with).
  std::shared_ptr<const policy::policy> policy;
  // Connections the process serves at most (--max-connections; else no number but the
  // descriptors), counted over all threads (one per connection_slot:
  // process.open_connections), and the descriptors their sockets may take
  // (process.descriptors, derived from RLIMIT_NOFILE: each connection may hold a client and
  // an upstream socket, a held shared events stream its client's only). At either limit
  // the gate stops accepting until a connection closes.
  std::size_t max_connections = 0;
  std::size_t descriptor_budget = 0;
  std::size_t descriptors_per_connection = 2;  // 4 for a tls:// upstream
  protocol::endpoint upstream;
  upstream_tls_config* upstream_tls = nullptr;  // --upstream tls://: how to reach it
  std::shared_ptr<spdlog::logger> log;
  audit_sink& audit;  // shared by the threads
  process_state& process;
  bool stopping = false;
  std::set<connection*> connections;  // this thread's live connections, for graceful shutdown
  std::set<stream*> tls_handshakes;   // and its TLS clients not yet connections (tls_front.cpp)
  // This thread's shared daemon events streams, by events_hub::key (events_hub.hpp), looked
  // up by a view of the key built in hub_key (no allocation per request).
  struct key_hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view k) const noexcept {
      return std::hash<std::string_view>{}(k);
    }
  };
  std::unordered_map<std::string, events_hub*, key_hash, std::equal_to<>> events_hubs;
  std::string hub_key;
  // This thread's copy of process.daemon, brought up to date by sync_daemon() as a request
  // starts.
  daemon_facts daemon;
  std::uint64_t daemon_seen = 0;
  void sync_daemon() { process.daemon.refresh(daemon, daemon_seen); }
  bool learning_version = false;  // one of this thread's connections is asking the daemon now
  // "<owner>/<full container ID>" known to carry the owner label. Labels never change
  // after create, so a positive answer stays true; names are always resolved afresh.
  std::unordered_set<std::string> owned_containers;
  static constexpr std::size_t owned_cache_limit = 16384;
  // The cache's key for one lookup, built in place (no allocation once it has grown):
  // filled and used with no wait in between, so one serves the thread's connections.
  std::string owned_key;
  metrics stats;  // this thread's; the threads' are summed on the --metrics listener
  // Request IDs: this thread's prefix (the process's random one plus the thread's index)
  // and a count of the requests it has read, so that an ID names one request of one gate
  // process (audit line, Dockgate-Request-Id).
  std::uint32_t request_id_prefix = 0;
  std::uint64_t requests = 0;
  net::steady_timer* watchdog = nullptr;  // looks at connection deadlines (server.cpp)
  // This thread's idle connections to the daemon, for the next client connection that needs
  // one (upstream_pool.hpp): given back when a client connection ends after a whole
  // exchange, closed after their idle timeout and at shutdown.
  upstream_pool idle_upstreams;
  buffer_pool buffers;  // I/O blocks, taken when data arrives and given back before a wait
  // Parsed request heads (~3 KB each), reused: a waiting connection holds none. Mapped
  // apart from the heap (mapped.hpp).
  std::vector<mapped_ptr<http::request_head>> spare_heads;
  mapped_ptr<http::request_head> take_head() {
    if (spare_heads.empty()) return make_mapped<http::request_head>();
    auto h = std::move(spare_heads.back());
    spare_heads.pop_back();
    return h;
  }
  void give_back_head(mapped_ptr<http::request_head> h) {
    if (h && spare_heads.size() < 256) spare_heads.push_back(std::move(h));
  }
};

}  // namespace dockgate::proxy
