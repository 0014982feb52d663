#pragma once
// The three executors of the cell contract (cell_contract.hpp): plain execs (one Docker
// exec for the cell, one for its clean-up), the session's cell runner (one request on its
// held exec, plain_cells.cpp / runner_cells.cpp) and a kernel session's kernel driver
// (kernel_cells.cpp). Each runs one cell under its session's lock and brings back what the
// cell did (executed); cells.cpp chooses one, collects the artifacts and answers.
// Internal to the sidecar library; the invariants are at the top of cells.cpp.

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "cells/cell_contract.hpp"
#include "cells/cell_listing.hpp"
#include "cells/cell_output.hpp"
#include "cells/runner.hpp"
#include "dockgate/client/engine.hpp"
#include "dockgate/sidecar/config.hpp"
#include "sessions/session_containers.hpp"
#include "util/refusal.hpp"

namespace dockgate::sidecar {

class container_engine;
class session_lifecycle;
struct session;

// What the executors work with: the configuration and the session core's objects.
struct cell_context {
  const config& cfg;
  const container_engine& engine;
  const session_containers& containers;
  session_lifecycle& lifecycle;  // a session whose clean-up failed is ended
};

// One cell given to an executor, under its session's lock.
struct cell_job {
  session& s;
  const std::string& code;
  std::int64_t timeout_ms;      // clamped (cells.cpp)
  cell_output* output;          // null: not streamed
  bool others_running = false;  // other cells were running when this one started
};

// A command that is no user code, run in the session's container (an artifact's `cat`).
using artifact_reader = std::function<client::exec_result(std::vector<std::string>,
                                                          std::chrono::milliseconds, std::size_t)>;

// What an executor brings back: the result but its files (stdout, stderr with the
// sandbox's notes, exit code, kernel block), the clean-up's listing of outputs, and how to
// read a file of them.
struct executed {
  cell_result result;
  cell_listing listing;
  artifact_reader read;
};

// The answer's files: new or changed regular files under /workspace/outputs (by the
// listing), read with `read` within the artifact limits (SANDBOX_MAX_FILES_PER_EXEC,
// SANDBOX_MAX_ARTIFACT_BYTES, SANDBOX_MAX_TOTAL_ARTIFACT_BYTES, SANDBOX_MAX_COLLECT_SECONDS);
// what is skipped is said in `errs` (artifacts.cpp).
std::vector<cell_artifact> collect_artifacts(const config& c, const cell_listing& listing,
                                             const artifact_reader& read, std::string& errs);

class cell_executor {
 public:
  virtual ~cell_executor() = default;
  virtual outcome<executed> run(const cell_job& job) = 0;
};

// The session ended because a process a cell left outlived the kill sweep (its container
// removed through the lifecycle); the refusal to answer.
refusal end_tainted_session(const cell_context& ctx, session& s);
// The runner's (or the kernel driver's) process looked at in its container: a plain exec
// reads its stat line (the state after the comm is the kernel's; no such file: gone).
runner_probe probe_in(const session_containers& containers, const std::string& container);
// The timeout as the sandbox's notes say it ("2.500s").
std::string seconds_text(std::int64_t ms);
// The output of an exec as the answer has it: valid UTF-8, the truncation notes.
void take_output(const client::exec_result& r, const config& c, cell_result& out);

// Plain execs: the cell and its clean-up each a Docker exec of the session user; the
// clean-up's kill sweep judged from the host.
class plain_executor final : public cell_executor {
 public:
  explicit plain_executor(const cell_context& ctx) : ctx_(ctx) {}
  outcome<executed> run(const cell_job& job) override;

  // The pieces the runner's executor shares (the same files, commands and answer).
  struct cell_files {
    std::string cell, before_file, oom_file;
    std::string seconds;  // the timeout, as `timeout` takes it
  };
  static cell_files files_for(std::int64_t timeout_ms);
  client::exec_options cell_exec(const cell_job& job, const cell_files& f) const;
  // The plain clean-up; nullopt when it ended the session (`ended` set).
  std::optional<std::string> clean_up(session& s, const cell_files& f, refusal& ended) const;
  // The plain sweep before a runner or a retry: its outcome (the session's
  // sweep_before_runner set from it).
  session_containers::sweep_outcome sweep(session& s) const;
  struct how_it_ran {
    std::chrono::steady_clock::duration elapsed{};
    bool runner_lost = false, runner_stopped = false;
  };
  outcome<executed> answer(const cell_job& job, const cell_files& f, const client::exec_result& r,
                           const std::string& listing_text, const how_it_ran& how,
                           artifact_reader read) const;
  artifact_reader reader(session& s) const;

 private:
  const cell_context& ctx_;
};

// The session's cell runner: the plain path's two execs as one request on its held exec;
// a runner that faults is dropped (the plain path finishes the cell) and the next cell
// starts another.
class runner_executor final : public cell_executor {
 public:
  runner_executor(const cell_context& ctx, const plain_executor& plain)
      : ctx_(ctx), plain_(plain) {}
  outcome<executed> run(const cell_job& job) override;
  // A runner for `s` where it may have one (SANDBOX_CELL_RUNNER on, not refused, none
  // running): only where the host sees no process of the session user. A refusal when
  // the sweep before it ended the session.
  std::optional<refusal> ensure(session& s) const;
  // The session's runner closed and forgotten; the next cell starts another after a sweep.
  static void drop(session& s, std::string_view why);

 private:
  artifact_reader reader(session& s, runner_probe probe) const;
  const cell_context& ctx_;
  const plain_executor& plain_;
};

// A kernel session's kernel driver: the cell run in the session's IPython kernel.
class kernel_executor final : public cell_executor {
 public:
  explicit kernel_executor(const cell_context& ctx) : ctx_(ctx) {}
  outcome<executed> run(const cell_job& job) override;
  // POST /sessions/{id}/restart on a held kernel session: its driver closed, the container
  // swept as judged from the host, a new driver (and kernel) started.
  outcome<kernel_restart> restart(session& s) const;

 private:
  std::optional<refusal> ensure_driver(session& s) const;
  std::optional<refusal> drop_driver(session& s, std::string_view why) const;
  const cell_context& ctx_;
};

}  // namespace dockgate::sidecar
