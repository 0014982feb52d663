// A session's executors as the sessions room starts them: the cell runner that makes a new
// container's workspace (one exec for the session's first answer, not two), the warm
// container's round trip, and a kernel session's driver.
#include "core/session_executors.hpp"

#include <chrono>

#include "cells/kernel.hpp"
#include "cells/runner.hpp"
#include "sessions/session.hpp"

namespace dockgate::sidecar {

using namespace std::chrono_literals;

namespace {

// How long a warm container's runner has to answer the claim's round trip: a few ms when
// it runs (a fork and exec of `true` in the container), never when it is frozen.
constexpr auto warm_check_timeout = 100ms;
// A warm container's warm-up (the data stack's imports): about a second on an idle host.
constexpr auto warm_up_timeout = 60s;
// A kernel driver's start: an IPython start on a loaded host.
constexpr auto kernel_start_timeout = 90s;

}  // namespace

executor_hooks session_executors(const container_engine& engine) {
  executor_hooks h;
  h.start_runner = [&engine](const std::string& container, const std::vector<std::string>& mkdir,
                             std::string& why) -> std::shared_ptr<cell_runner> {
    auto started = cell_runner::start(engine, container, 20s, &why);
    if (!started) return nullptr;
    auto made = started->run(mkdir, {}, 64 * 1024, {20s, 20s, {}}, nullptr);
    if (made.state == cell_runner::outcome::done && made.result.exit_code == 0) return started;
    started->close();
    why = made.state == cell_runner::outcome::done
              ? "mkdir exit " + std::to_string(made.result.exit_code)
              : made.why;
    return nullptr;
  };
  h.runner_ready = [](cell_runner& runner) {
    auto r = runner.run({"true"}, {}, 64, {warm_check_timeout, warm_check_timeout, {}}, nullptr);
    return r.state == cell_runner::outcome::done && r.result.exit_code == 0;
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
