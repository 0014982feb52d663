#pragma once
// Throughput of a hijacked exec session: BYTES of /dev/zero written by dd in a running container,
// read as a raw TTY stream through `POST /exec/{id}/start` with `Upgrade: tcp`.

#include <cstdint>
#include <string>

#include "dockgate/common/endpoint.hpp"

namespace dockgate::bench {

struct exec_result {
  std::uint64_t bytes = 0;  // stream bytes after the response head
  double seconds = 0;       // from sending the start request to the end of the stream
  int status = 0;           // of the start answer: 101 (upgrade), or 200 (legacy raw stream)
  std::string error;        // empty when the whole stream arrived

  double mib_per_s() const {
    return seconds > 0 ? static_cast<double>(bytes) / (1 << 20) / seconds : 0;
  }
};

// POST /containers/{id}/exec of a TTY exec writing `bytes` zeros; returns the exec ID, or
// an empty string with `error` set. dockerd announces it to every event stream.
std::string create_exec(const common::endpoint& ep, const std::string& container,
                        std::uint64_t bytes, std::string& error);

// Creates the exec through `ep` (so a gate reviews its body as it would a client's) and
// streams it; `bytes` must arrive exactly.
exec_result run_exec_stream(const common::endpoint& ep, const std::string& container,
                            std::uint64_t bytes);

}  // namespace dockgate::bench
