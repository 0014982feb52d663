#include "exec_stream.hpp"

#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <chrono>
#include <vector>

#include "bench_net.hpp"

namespace dockgate::bench {

namespace {

using clock_type = std::chrono::steady_clock;

// A stalled stream ends the measurement instead of hanging the bench.
void set_receive_timeout(int fd, int seconds) {
  timeval tv{seconds, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
}

}  // namespace

std::string create_exec(const common::endpoint& ep, const std::string& container,
                        std::uint64_t bytes, std::string& error) {
  int fd = connect_to(ep);
  if (fd < 0) {
    error = "exec create: cannot connect";
    return {};
  }
  set_receive_timeout(fd, 30);
  // dd writes 1 MiB at a time (busybox head copies through a small buffer, and would be
  // the bottleneck); count_bytes makes count a byte count, status=none keeps its summary
  // out of the TTY stream.
  const std::string body =
      R"({"AttachStdin":false,"AttachStdout":true,"AttachStderr":true,"Tty":true,)"
      R"("Cmd":["dd","if=/dev/zero","bs=1048576","count=)" +
      std::to_string(bytes) + R"(","iflag=count_bytes","status=none"]})";
  std::string buf, answer;
  int status = send_all(fd, request("POST", "/v1.41/containers/" + container + "/exec", body))
                   ? read_response(fd, buf, &answer)
                   : 0;
  ::close(fd);
  auto at = answer.find("\"Id\":\"");
  if (status != 201 || at == std::string::npos) {
    error = "exec create: status " + std::to_string(status) + " " + answer.substr(0, 200);
    return {};
  }
  at += 6;
  return answer.substr(at, answer.find('"', at) - at);
}

exec_result run_exec_stream(const common::endpoint& ep, const std::string& container,
                            std::uint64_t bytes) {
  exec_result r;
  const std::string exec_id = create_exec(ep, container, bytes, r.error);
  if (exec_id.empty()) return r;
  int fd = connect_to(ep);
  if (fd < 0) {
    r.error = "exec start: cannot connect";
    return r;
  }
  set_receive_timeout(fd, 60);
  const auto start = clock_type::now();
  std::string buf;
  if (!send_all(
          fd, request("POST", "/v1.41/exec/" + exec_id + "/start", R"({"Detach":false,"Tty":true})",
                      "Connection: Upgrade\r\nUpgrade: tcp\r\n"))) {
    r.error = "exec start: send failed";
    ::close(fd);
    return r;
  }
  r.status = status_of(read_head(fd, buf));
  // dockerd answers 101 to an upgrade; a relay that does not pass the upgrade on may give
  // the older 200 with a raw stream. Either way the stream runs until the daemon closes it.
  if (r.status == 101 || r.status == 200) {
    r.bytes = buf.size();
    std::vector<char> chunk(1 << 18);
    for (;;) {
      ssize_t n = ::recv(fd, chunk.data(), chunk.size(), 0);
      if (n <= 0) {
        if (n < 0) r.error = "exec stream: receive failed or timed out";
        break;
      }
      r.bytes += static_cast<std::uint64_t>(n);
    }
  } else {
    r.error = "exec start: status " + std::to_string(r.status);
  }
  r.seconds = std::chrono::duration<double>(clock_type::now() - start).count();
  ::close(fd);
  if (r.error.empty() && r.bytes != bytes)
    r.error =
        "exec stream: " + std::to_string(r.bytes) + " bytes, expected " + std::to_string(bytes);
  return r;
}

}  // namespace dockgate::bench
