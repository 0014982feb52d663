#pragma once
// Request load: N client threads sending the same request back to back for a fixed time,
// each on one keep-alive connection, or (per_request) each request on a connection of its
// own, opened before it and closed after its answer, as the docker CLI does (one process,
// one connection).

#include <cstddef>
#include <string>

#include "dockgate/common/endpoint.hpp"

namespace dockgate::bench {

struct keepalive_result {
  std::size_t requests = 0;  // answered with 200 and read to the end
  double seconds = 0;
  double p50_us = 0;
  double p99_us = 0;
  std::size_t errors = 0;  // connections that failed (connect, I/O, a status other than 200)

  double rps() const { return seconds > 0 ? static_cast<double>(requests) / seconds : 0; }
};

// Latency per request; with `per_request` from the connect to the whole answer.
keepalive_result run_keepalive(const common::endpoint& ep, const std::string& request,
                               int connections, double seconds, bool per_request = false);

}  // namespace dockgate::bench
