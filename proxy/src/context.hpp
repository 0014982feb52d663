#pragma once
// What every connection of one proxy process shares.

#include <spdlog/logger.h>

#include <memory>
#include <set>

#include "dockgate/policy/policy_file.hpp"
#include "dockgate/proxy/options.hpp"
#include "net.hpp"

namespace dockgate::proxy {

class connection;

struct proxy_context {
  const serve_options& options;
  const policy::policy& policy;
  protocol::endpoint upstream;
  std::shared_ptr<spdlog::logger> log;
  std::shared_ptr<spdlog::logger> audit;
  bool stopping = false;
  std::set<connection*> connections;  // live connections, for graceful shutdown
};

}  // namespace dockgate::proxy
