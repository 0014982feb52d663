#pragma once
// The in-container cell runner, seen from the sidecar (the program: sidecar/runner/runner.py).
// One hijacked exec per session, started by its first cell, runs each command the
// sidecar sends as a fresh process in the container and answers on the same stream, so a
// cell costs no Docker round trip. Internal to the sidecar library.
//
// Invariant: nothing that comes back is trusted. Every frame is bounded
// (max_runner_frame), every field parsed strictly, output capped here whatever the
// runner reports; the first fault (a malformed or oversized frame, an unexpected kind, a
// byte on its stderr, EOF, the deadline) ends this runner: its stream is closed, the
// plain clean-up's kill sweep ends its process (session_containers.cpp), and the session's next
// cell starts a new one. A runner runs as the session user, so a cell can stop or kill it (a signal
// needs no more than the same uid): a runner that has not answered by the time a sound one would
// have (answer_by) is looked at (runner_probe: its process's state), and one found
// stopped or gone is given up at once instead of at the hard deadline.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dockgate/client/engine.hpp"

namespace dockgate::sidecar {

class container_engine;

// The runner's source, embedded at build time (runner_program.cpp.in).
extern const std::string_view runner_program;

// The largest answer frame the sidecar reads: kind (1), length (4) and payload.
inline constexpr std::size_t max_runner_frame = 1 << 20;
inline constexpr std::size_t runner_frame_header = 5;

// The runner's answer stream, cut into frames (no I/O: unit-tested).
class runner_frames {
 public:
  // status, value, fault: the kernel driver's (kernel.hpp), never the runner's; value and
  // fault only in a kept kernel's answer (run_request's `structured`).
  enum class kind { hello, started, out, err, exit, listing, done, status, value, fault };
  struct frame {
    kind type;
    std::string payload;
    bool operator==(const frame&) const = default;
  };
  // Appends bytes of the runner's stdout.
  void feed(std::string_view bytes) { buffer_.append(bytes); }
  // The next whole frame; nullopt when more bytes are needed or (failed()) the stream
  // is malformed: an unknown kind, or a frame over max_runner_frame.
  std::optional<frame> next();
  bool failed() const { return failed_; }
  std::size_t buffered() const { return buffer_.size(); }

 private:
  std::string buffer_;
  bool failed_ = false;
};

// An exit frame's payload: "<exit code> <stdout bytes dropped> <stderr bytes dropped>",
// plain decimal, nothing else.
struct runner_exit {
  std::int64_t code = 0;
  std::uint64_t out_dropped = 0;
  std::uint64_t err_dropped = 0;
  bool operator==(const runner_exit&) const = default;
};
std::optional<runner_exit> parse_runner_exit(std::string_view payload);

// The hello: "dockgate-runner 2 <its PID in the container>"; the PID, or nullopt for
// anything else (another program, another version, a PID that is no plain decimal).
std::optional<int> parse_runner_hello(std::string_view payload);

// What a runner's process is doing, from its /proc/<pid>/stat line (the state after the
// last ") ": the comm before it is the process's to choose). `gone`: no such process, or
// a zombie.
enum class runner_state { running, stopped, gone, unknown };
runner_state parse_runner_stat(std::string_view stat_line);
// Looks at the runner's process in its container (cells.cpp: a plain exec).
using runner_probe = std::function<runner_state(int pid)>;

// A request: its op ('R' a command, 'C' a cell), the output cap per stream, and lists of
// byte strings (runner.py says which).
std::string runner_request(char op, std::uint32_t cap,
                           const std::vector<std::vector<std::string_view>>& lists);

// A cell as the runner runs it: what the plain path's two execs do, in one request.
struct runner_cell {
  std::vector<std::string> argv;  // `sh -c 'exec timeout --kill-after=2s <T>s python3 <cell>'`
  std::string_view code;
  std::string cell, before_file, oom_file, outputs;  // paths in the container
  std::vector<std::string> sweep;  // the kill sweep's command; empty: the runner's own (kill_sweep)
  // The cell's timeout in ms (argv's <T>): set, the runner may fork the cell from its warm
  // interpreter in argv's shape (forkserver.py forked()) instead of running argv.
  std::string fork_timeout_ms;
  // With fork_timeout_ms: the next cell's fork is made only once no request has come for
  // this many ms (other cells run: it would take their CPU); empty: at once.
  std::string pair_after_ms;
};

class cell_runner {
 public:
  enum class outcome {
    done,         // the command ran and its answer was whole
    not_started,  // the runner failed before it acknowledged the command: it did not run
    lost,         // the runner failed after starting it: what came back is partial
  };
  struct run_result {
    outcome state = outcome::not_started;
    client::exec_result result;  // as engine::exec fills it; timed_out: the host deadline passed
    std::string why;             // not done: what went wrong
    // Not done after the probe: what the runner's process was found doing (stopped: it
    // was frozen, by a signal or otherwise; gone: it had ended). unknown: not looked at.
    runner_state found = runner_state::unknown;
  };
  // When a sound runner has answered, and how to look at one that has not. The answer
  // is awaited up to the hard deadline only while the probe finds the runner running.
  struct patience {
    std::chrono::milliseconds answer_by;
    std::chrono::milliseconds hard;
    runner_probe probe;  // empty: wait for the hard deadline
  };

  // Starts the runner in `container` and waits for its hello; nullptr (with `error`) if
  // it does not answer as expected within `timeout`.
  // It runs as the session user (session_user), as cells do.
  static std::shared_ptr<cell_runner> start(const container_engine& engine,
                                            const std::string& container,
                                            std::chrono::milliseconds timeout, std::string* error);
  // Its PID in the container, as its hello said.
  int pid() const { return pid_; }
  // Another program on the same framing and the same walls (the kernel driver,
  // kernel.hpp): `argv` started as the session user, its first frame a hello that
  // `parse_hello` turns into its PID; the hello's payload is left in *hello either way.
  static std::shared_ptr<cell_runner> start_program(
      const container_engine& engine, const std::string& container, std::vector<std::string> argv,
      const std::function<std::optional<int>(std::string_view)>& parse_hello,
      std::chrono::milliseconds timeout, std::string* error, std::string* hello);

  // Runs `argv` with `stdin_data` on its stdin; stdout and stderr each capped at `cap`
  // bytes here (what is kept also goes to `on_output` as it arrives), all within
  // `timeout`. After anything but `done` the runner is closed and usable() is false.
  run_result run(const std::vector<std::string>& argv, std::string_view stdin_data, std::size_t cap,
                 const patience& wait, const std::function<void(int, std::string_view)>& on_output);
  // A cell: `run` is its outcome (as above); `listing` the clean-up's output in the plain
  // clean-up's format (cells.cpp parse_cell_listing), nullopt if the runner failed after
  // the cell's exit (then the plain clean-up is still to be done; `cleanup_found` says
  // what the probe found if it was looked at). `listing_cap` bounds it; `cleanup` is the
  // clean-up's own patience.
  struct cell_result {
    run_result run;
    std::optional<std::string> listing;
    runner_state cleanup_found = runner_state::unknown;
    client::clock_type::time_point exited;  // when its exit frame arrived
  };
  cell_result run_cell(const runner_cell& c, std::size_t cap, const patience& wait,
                       const std::function<void(int, std::string_view)>& on_output,
                       std::size_t listing_cap, const patience& cleanup);
  // A request of the kernel driver (kernel.hpp): answered as a cell (up to its exit frame
  // as run(), then the clean-up's listing as run_cell()), with at most one status frame
  // between the exit and the listing, its payload left in *status ("" if none came); status
  // null: none is taken (a cell runner's, run_cell).
  // `structured`: a kept kernel's cell (kernel.hpp kernel_code_request): its value and
  // fault frames come between the started and the exit frame, each whole to `on_output`
  // as stream output_value or output_fault (at most `cap` bytes of them in all); anywhere
  // else, and in any other answer, they are faults.
  static constexpr int output_value = 3, output_fault = 4;
  cell_result run_request(const std::string& request, std::size_t cap, const patience& wait,
                          const std::function<void(int, std::string_view)>& on_output,
                          std::size_t listing_cap, const patience& cleanup, std::string* status,
                          bool structured = false);
  // Waits until the runner's warm-up (its fork server's imports, which go on beside its
  // requests: forkserver.py WarmUp) has ended; false if the runner failed meanwhile (it
  // is closed then). The warm pool's: a miss never waits for it.
  bool await_warm_up(const patience& wait);
  bool usable() const { return stream_.has_value(); }
  // Open, and nothing came from the runner since its last answer, not even EOF (asked
  // without waiting; false whenever unsure, e.g. over TLS). The runner is a process of its
  // container, and a stopped container's exec streams end: an idle runner's container runs.
  bool idle() const { return stream_ && frames_.buffered() == 0 && stream_->quiet(); }
  // Ends the stream (the runner reads EOF and exits when idle).
  void close() { stream_.reset(); }

 private:
  explicit cell_runner(client::exec_stream s) : stream_(std::move(s)) {}
  // The next frame, read under `deadline`; nullopt with `why` set on any fault.
  std::optional<runner_frames::frame> next(client::clock_type::time_point deadline,
                                           std::string& why, bool& timed_out);
  // The same, awaited with patience: past `answer_by` only while the probe finds the
  // runner running (what it found in `found`).
  struct waiting {
    client::clock_type::time_point answer_by, hard;
    const runner_probe* probe;
    bool looked = false;
  };
  std::optional<runner_frames::frame> next(waiting& w, std::string& why, bool& timed_out,
                                           runner_state& found);
  // The waiting points at p's probe, which must outlive it (a temporary patience cannot
  // be given: its probe would be gone when a late answer asks it).
  waiting from_now(const patience& p, std::chrono::milliseconds answer_by) const;
  waiting from_now(const patience& p) const { return from_now(p, p.answer_by); }
  waiting from_now(patience&&, std::chrono::milliseconds) const = delete;
  waiting from_now(patience&&) const = delete;
  // Sends a request and reads its answer up to the exit frame.
  run_result exchange(const std::string& request, std::size_t cap, const patience& wait,
                      const std::function<void(int, std::string_view)>& on_output,
                      bool structured = false);

  std::optional<client::exec_stream> stream_;
  runner_frames frames_;
  int pid_ = 0;
};

}  // namespace dockgate::sidecar
