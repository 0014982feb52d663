#pragma once
// OpenSandbox's code contexts (execd's /code): a context is one kernel driver in keep mode
// and its IPython kernel (cells/kernel.hpp, sidecar/runner/kernel.py) in the sandbox's
// container, as the session user. The requests come typed from the execd front; the answers
// are values, events or refusals, never HTTP. Internal to the sidecar library; the
// invariants are in code_interpreter.cpp.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "cells/kernel.hpp"
#include "dockgate/sidecar/config.hpp"
#include "util/refusal.hpp"

namespace dockgate::sidecar {

class session_registry;
class session_containers;
struct session;

struct code_context_info {
  std::string id;
  std::string language;
  bool operator==(const code_context_info&) const = default;
};

// One context: its driver (which holds its kernel) and the one cell it may run at a time.
struct code_context {
  std::string id, language, cwd;
  std::mutex run;  // held by the cell that runs; another is refused (conflict), not queued
  std::shared_ptr<cell_runner> driver;  // under `run`
  std::atomic<int> pid{0};              // the driver's PID in the container (its hello)
};

// A sandbox's contexts (session.hpp holds them; they end with it: the container's removal
// ends every driver, and the last reference closes their streams).
struct code_contexts {
  std::mutex m;
  std::vector<std::shared_ptr<code_context>> all;  // in creation order, under `m`
  std::map<std::string, std::string> defaults;     // language -> its default context's id
  std::mutex default_made;                         // one default context per language
};

// What a run says while the kernel works, in the kernel's order: the context's id once it
// runs, its stdout (1) and stderr (2), its results and displays, its error.
class code_events {
 public:
  virtual ~code_events() = default;
  virtual void started(const std::string& context_id) = 0;
  virtual void output(int stream, std::string_view text) = 0;
  virtual void value(const code_value& v) = 0;
  virtual void fault(const code_fault& f) = 0;
  // Whether the client still reads (false: the cell is interrupted once).
  virtual bool listening() const { return true; }
};

struct code_finished {
  bool failed = false;  // a fault was said (the cell's error, or the kernel's end)
  std::int64_t execution_count = 0;
  std::chrono::milliseconds took{0};
};

struct code_run {
  std::string session_id;
  std::string context_id;  // "": the language's default context (made at first use)
  std::string language;    // as asked ("python" or "python3")
  std::string code;
};

// The language a context may have, as the client names it ("python", "python3"); nullopt
// for any other (400, with the known list).
std::optional<std::string> code_language(std::string_view requested);
inline constexpr std::string_view known_code_languages = "python";

class code_interpreter {
 public:
  code_interpreter(const config& c, const container_engine& engine, session_registry& registry,
                   const session_containers& containers)
      : config_(c), engine_(engine), registry_(registry), containers_(containers) {}

  // A new context: its driver started and its kernel ready (the image's lack named when it
  // cannot be: failed).
  outcome<code_context_info> create(const std::string& session_id, std::string_view language,
                                    const std::string& cwd) const;
  // `r.code` run in its context to its end (or its interrupt); a context that runs a cell
  // refuses another (conflict).
  outcome<code_finished> run(const code_run& r, code_events& events) const;
  outcome<code_context_info> get(const std::string& session_id, const std::string& id) const;
  // Every context of the sandbox, or of one language ("": all).
  outcome<std::vector<code_context_info>> list(const std::string& session_id,
                                               std::string_view language) const;
  outcome<bool> remove(const std::string& session_id, const std::string& id) const;
  outcome<bool> remove_language(const std::string& session_id, std::string_view language) const;
  // The context's running cell interrupted (jupyter's interrupt: KeyboardInterrupt); nothing
  // when none runs.
  outcome<bool> interrupt(const std::string& session_id, const std::string& id) const;

 private:
  outcome<std::shared_ptr<session>> session_of(const std::string& session_id,
                                               bool touches_container) const;
  std::shared_ptr<code_contexts> contexts_of(session& s) const;
  outcome<std::shared_ptr<code_context>> start(session& s, std::string_view language,
                                               const std::string& cwd) const;
  outcome<std::shared_ptr<code_context>> context_for(session& s, const code_run& r) const;
  // Signals the context's driver (SIGUSR1 interrupt, SIGTERM end) if it is still ours.
  void signal_driver(const session& s, const code_context& c, const char* sig) const;

  const config& config_;
  const container_engine& engine_;
  session_registry& registry_;
  const session_containers& containers_;
};

}  // namespace dockgate::sidecar
