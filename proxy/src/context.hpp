#pragma once
// What every connection of one proxy process shares.

#include <spdlog/logger.h>

#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_set>

#include "dockgate/proxy/metrics.hpp"

#include "dockgate/policy/policy_file.hpp"
#include "dockgate/policy/body_review.hpp"
#include "dockgate/policy/route.hpp"
#include "dockgate/http/request_head.hpp"
#include "dockgate/proxy/options.hpp"
#include "audit_sink.hpp"
#include "buffer_pool.hpp"
#include "mapped.hpp"
#include "net.hpp"

#include <boost/asio/steady_timer.hpp>

namespace dockgate::proxy {

class connection;
struct upstream_tls_config;  // upstream_tls.hpp

struct proxy_context {
  proxy_context(const serve_options& o, std::shared_ptr<const policy::policy> p, protocol::endpoint u,
                std::shared_ptr<spdlog::logger> l, audit_sink& a)
      : options(o), policy(std::move(p)), upstream(std::move(u)), log(std::move(l)), audit(a) {}

  const serve_options& options;
  // The policy new requests are decided by; SIGHUP replaces it whole (a request holds the
  // one it started with).
  std::shared_ptr<const policy::policy> policy;
  // Connections the process serves at most (derived from RLIMIT_NOFILE: each may hold a
  // client and an upstream socket); at the limit it stops accepting until one closes.
  std::size_t max_connections = 0;
  protocol::endpoint upstream;
  upstream_tls_config* upstream_tls = nullptr;  // --upstream tls://: how to reach it
  std::shared_ptr<spdlog::logger> log;
  audit_sink& audit;
  bool stopping = false;
  std::set<connection*> connections;  // live connections, for graceful shutdown
  // The API version every forwarded request is pinned to: the daemon's own (from
  // /version), capped at the newest the route table knows. Learned on first use.
  std::optional<std::string> api_version;
  policy::api_version daemon_version{};  // the same, as numbers
  bool daemon_cgroup_v1 = true;          // from /info (CgroupVersion), learned with the version
  bool learning_version = false;         // one connection is asking the daemon now
  // "<owner>/<full container ID>" known to carry the owner label. Labels never change
  // after create, so a positive answer stays true; names are always resolved afresh.
  std::unordered_set<std::string> owned_containers;
  static constexpr std::size_t owned_cache_limit = 16384;
  metrics stats;  // rendered on the --metrics listener
  // Request IDs: this process's random prefix and a count of the requests it has read, so
  // that an ID names one request of one gate process (audit line, Dockgate-Request-Id).
  std::uint32_t request_id_prefix = 0;
  std::uint64_t requests = 0;
  net::steady_timer* watchdog = nullptr;  // looks at connection deadlines (server.cpp)
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
