// A session's executors as the sessions room starts them: the cell runner that makes a new
// container's workspace (one exec for the session's first answer, not two), the warm
// container's round trip, and a kernel session's driver.
#include "core/session_executors.hpp"

#include <chrono>

#include "cells/kernel.hpp"
#include "cells/runner.hpp"
#include "sessions/isolation/isolation.hpp"
#include "sessions/session.hpp"

namespace dockgate::sidecar {

using namespace std::chrono_literals;

namespace {

// A warm container's warm-up (the data stack's imports): about a second on an idle host.
constexpr auto warm_up_timeout = 60s;
// A kernel driver's start: an IPython start on a loaded host.
constexpr auto kernel_start_timeout = 90s;

}  // namespace

executor_hooks session_executors(const container_engine& engine) {
  executor_hooks h;
  h.start_runner = [&engine](const std::string& container, const std::vector<std::string>& mkdir,
                             std::string* output,
                             std::string& why) -> std::shared_ptr<cell_runner> {
    auto started = cell_runner::start(engine, container, 20s, &why);
    if (!started) return nullptr;
    auto made = started->run(mkdir, {}, 64 * 1024, {20s, 20s, {}}, nullptr);
    if (made.state == cell_runner::outcome::done && made.result.exit_code == 0) {
      if (output) *output = made.result.stdout_data;
      return started;
    }
    started->close();
    why = made.state == cell_runner::outcome::done
              ? "mkdir exit " + std::to_string(made.result.exit_code)
              : made.why;
    return nullptr;
  };
  h.isolation_probe = isolation_probe_command();
  h.runner_ready = [](cell_runner& runner, std::chrono::milliseconds within) {
    // W: a warm runner (every pool container's: it joined the pool after its warm-up)
    // answers it at once, with no process of its own to start (a fork and exec of `true`
    // cost each claim a few ms of CPU, which 50 claims at once pay together).
    return runner.await_warm_up({within, within, {}});
  };
  h.runner_warm = [](cell_runner& runner) {
    return runner.await_warm_up({warm_up_timeout, warm_up_timeout, {}});
  };
  h.start_kernel = [&engine](session& s) {
    // A kernel session's container runs no cell runner (the driver's sweep would end it,
    // and it would hold nothing the kernel needs): a warm container's is closed (it reads
    // EOF and exits; the driver's first sweep ends it if it has not yet). The driver starts
    // where no process of the session user ran any code: a new container.
    if (s.runner) s.runner->close();
    s.runner.reset();
    std::string why;
    s.kernel_driver = start_kernel_driver(engine, s.container, kernel_start_timeout, &why);
    return s.kernel_driver ? std::string() : why;
  };
  h.kernel_name = [](std::string_view requested) { return kernel_name(requested); };
  return h;
}

}  // namespace dockgate::sidecar
