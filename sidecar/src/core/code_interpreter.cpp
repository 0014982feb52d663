// OpenSandbox's code contexts on the kernel mode (docs/opensandbox-api.md, "Code contexts";
// docs/design.md, "The OpenSandbox front").
//
// Invariants it keeps:
// - A context's driver runs in keep mode: it never sweeps. An OpenSandbox sandbox keeps its
//   processes between commands (an app a command started is reached by the next), so a /code
//   run ends nothing but its own cell; and a driver starts while the client's processes run.
//   The Aivory kernel's two walls (the sweep after each cell, no driver started while a
//   session-user process may exist) keep one cell's processes from the next cell's answer
//   and from the driver's window before it is undumpable. In a sandbox every process is the
//   client's own: the driver holds no secret (no key, no token, no credential: its requests
//   are the client's code, its answers the client's results), and a process that forges or
//   reads its frames reaches only that sandbox's own client, who could have run it anyway.
// - The driver is still trusted no more than the runner: every frame bounded and parsed
//   strictly (runner.hpp; parse_code_value, parse_code_fault re-serialised by the front,
//   never passed through), and the first fault drops it (its kernel ended by a signal, the
//   next run of that context starts a new one and says the state is gone).
// - Nothing here waits on a frozen container: a paused sandbox's /code answers conflict at
//   once (as its commands do); a delete, the reaper and pause take no lock a cell holds, and
//   a context's driver ends with its container (its stream then ends, and so does its run).
// - A context is signalled only by the PID its driver said, and only while that process is
//   still a kernel driver (its command line), so a PID reused by the client's own process
//   is never signalled.
#include "core/code_interpreter.hpp"

#include <algorithm>

#include "cells/executors.hpp"
#include "sessions/session.hpp"
#include "sessions/session_containers.hpp"
#include "sessions/session_registry.hpp"
#include "util/ids.hpp"

namespace dockgate::sidecar {

using namespace std::chrono_literals;

namespace {

constexpr auto driver_start = 90s;
// Contexts a sandbox may hold at once: each is a kernel in its container and a held exec
// (a socket) of the sidecar's, so a client cannot make the sidecar hold sockets without end.
constexpr std::size_t max_contexts = 32;
// A cell has no timeout of its own (execd's have none): the hard deadline only frees the
// request of a driver that neither answers nor ends.
constexpr auto cell_patience = 24h;

code_context_info info_of(const code_context& c) {
  return {c.id, c.language};
}

}  // namespace

std::optional<std::string> code_language(std::string_view requested) {
  return kernel_name(requested);
}

outcome<std::shared_ptr<session>> code_interpreter::session_of(const std::string& session_id,
                                                               bool touches_container) const {
  auto s = registry_.find(session_id);
  if (!s || s->terminating) return refuse(refusal_kind::not_found, "sandbox not found");
  if (touches_container && s->paused) return refuse(refusal_kind::conflict, "sandbox is paused");
  s->last_used = std::chrono::steady_clock::now();
  return s;
}

std::shared_ptr<code_contexts> code_interpreter::contexts_of(session& s) const {
  std::lock_guard g(s.facts_mutex);
  if (!s.code) s.code = std::make_shared<code_contexts>();
  return s.code;
}

void code_interpreter::signal_driver(const session& s, const code_context& c,
                                     const char* sig) const {
  const int pid = c.pid.load();
  if (pid <= 0) return;
  containers_.run_in(
      s.container,
      {"sh", "-c", "grep -q dockgate-kernel /proc/$2/cmdline 2>/dev/null && kill -$1 $2", "sh", sig,
       std::to_string(pid)},
      10s);
}

outcome<std::shared_ptr<code_context>> code_interpreter::start(session& s,
                                                               std::string_view language,
                                                               const std::string& cwd) const {
  auto set = contexts_of(s);
  const auto too_many = [&] {
    return refuse(refusal_kind::busy, "the sandbox holds " + std::to_string(max_contexts) +
                                          " contexts, the most it may: delete one first");
  };
  {
    std::lock_guard g(set->m);
    if (set->all.size() >= max_contexts) return too_many();
  }
  auto c = std::make_shared<code_context>();
  c->id = random_hex(16);
  c->language = std::string(language);
  c->cwd = cwd;
  std::string why;
  c->driver = start_kernel_driver(engine_, s.container, driver_start, &why, cwd);
  if (!c->driver && !cwd.empty())
    why += " (the kernel starts in cwd " + cwd + ": a directory the sandbox's user may enter?)";
  if (!c->driver) return refuse(refusal_kind::failed, why);
  c->pid = c->driver->pid();
  std::lock_guard g(set->m);
  if (set->all.size() >= max_contexts) {  // others were made while this one started
    signal_driver(s, *c, "TERM");
    c->driver->close();
    return too_many();
  }
  set->all.push_back(c);
  return c;
}

outcome<code_context_info> code_interpreter::create(const std::string& session_id,
                                                    std::string_view language,
                                                    const std::string& cwd) const {
  if (!code_language(language))
    return refuse(refusal_kind::invalid,
                  "language " + std::string(language) +
                      " is not supported (known: " + std::string(known_code_languages) + ")");
  if (!cwd.empty() && cwd.front() != '/')
    return refuse(refusal_kind::invalid, "cwd must be an absolute path");
  auto s = session_of(session_id, true);
  if (!s) return s.error();
  auto c = start(*s.value(), language, cwd);
  if (!c) return c.error();
  return info_of(*c.value());
}

outcome<std::shared_ptr<code_context>> code_interpreter::context_for(session& s,
                                                                     const code_run& r) const {
  auto set = contexts_of(s);
  if (!r.context_id.empty()) {
    std::lock_guard g(set->m);
    for (const auto& c : set->all)
      if (c->id == r.context_id) return c;
    return refuse(refusal_kind::not_found, "context " + r.context_id + " not found");
  }
  if (!code_language(r.language))
    return refuse(refusal_kind::invalid, "language " + r.language + " is not supported (known: " +
                                             std::string(known_code_languages) + ")");
  // The language's default context, as execd keeps one: made at its first use.
  const std::string lang = *code_language(r.language);
  std::lock_guard made(set->default_made);
  {
    std::lock_guard g(set->m);
    if (auto d = set->defaults.find(lang); d != set->defaults.end())
      for (const auto& c : set->all)
        if (c->id == d->second) return c;
  }
  auto c = start(s, r.language, "");
  if (!c) return c.error();
  std::lock_guard g(set->m);
  set->defaults[lang] = c.value()->id;
  return c;
}

namespace {

// The driver's frames as the run's events; a malformed value or fault is not passed on,
// and drops the driver after the run (it is trusted no more than the runner).
struct relay {
  code_events& events;
  bool malformed = false;
  bool failed = false;
  bool interrupted = false;
  void operator()(int stream, std::string_view data) {
    if (stream == cell_runner::output_value) {
      if (auto v = parse_code_value(data))
        events.value(*v);
      else
        malformed = true;
    } else if (stream == cell_runner::output_fault) {
      if (auto f = parse_code_fault(data)) {
        failed = true;
        events.fault(*f);
      } else {
        malformed = true;
      }
    } else {
      events.output(stream, data);
    }
  }
};

}  // namespace

outcome<code_finished> code_interpreter::run(const code_run& r, code_events& events) const {
  auto s = session_of(r.session_id, true);
  if (!s) return s.error();
  auto found = context_for(*s.value(), r);
  if (!found) return found.error();
  code_context& c = *found.value();
  std::unique_lock busy(c.run, std::try_to_lock);
  if (!busy.owns_lock())
    return refuse(refusal_kind::conflict, "context " + c.id + " is running a cell");
  bool restarted = false;
  if (!c.driver || !c.driver->usable()) {
    // Its last driver faulted: a new one, a new kernel (the state is gone, and said so).
    std::string why;
    c.driver = start_kernel_driver(engine_, s.value()->container, driver_start, &why, c.cwd);
    if (!c.driver) return refuse(refusal_kind::failed, why);
    c.pid = c.driver->pid();
    restarted = true;
  }
  events.started(c.id);
  const auto begun = std::chrono::steady_clock::now();
  relay to_client{events};
  const auto cap = static_cast<std::size_t>(config_.max_output_bytes);
  const runner_probe probe = probe_in(containers_, s.value()->container);
  const cell_runner::patience wait{cell_patience, cell_patience, probe};
  std::string status_text;
  auto ran = c.driver->run_request(
      kernel_code_request(r.code, static_cast<std::uint32_t>(std::min<std::size_t>(cap, 1u << 31))),
      cap, wait,
      [&](int stream, std::string_view data) {
        to_client(stream, data);
        if (!to_client.interrupted && !events.listening()) {
          to_client.interrupted = true;  // the client went: its cell is interrupted, once
          signal_driver(*s.value(), c, "USR1");
        }
      },
      0, {5s, 30s, probe}, &status_text, true);
  const auto status = parse_kernel_status(status_text);
  code_finished done;
  done.took = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - begun);
  done.failed = to_client.failed;
  if (ran.run.state != cell_runner::outcome::done || !ran.listing || !status ||
      to_client.malformed) {
    signal_driver(*s.value(), c, "TERM");  // its kernel with it (the driver's own shutdown)
    c.driver.reset();
    c.pid = 0;
    done.failed = true;
    events.fault({"KernelDied",
                  "the context's kernel driver ended or stopped answering (" +
                      (ran.run.why.empty() ? std::string("malformed frame") : ran.run.why) +
                      "); the next run starts a new kernel",
                  {}});
    return done;
  }
  if (status->died) {
    done.failed = true;
    events.fault({"KernelDied",
                  "the kernel's process ended while the cell ran; the next run starts a new "
                  "kernel",
                  {}});
  } else if (restarted || status->restarted) {
    events.output(2, "[sandbox] this context's kernel was restarted: its state is gone\n");
  }
  done.execution_count = status->execution_count;
  return done;
}

outcome<code_context_info> code_interpreter::get(const std::string& session_id,
                                                 const std::string& id) const {
  auto s = session_of(session_id, false);
  if (!s) return s.error();
  auto set = contexts_of(*s.value());
  std::lock_guard g(set->m);
  for (const auto& c : set->all)
    if (c->id == id) return info_of(*c);
  return refuse(refusal_kind::not_found, "context " + id + " not found");
}

outcome<std::vector<code_context_info>> code_interpreter::list(const std::string& session_id,
                                                               std::string_view language) const {
  auto s = session_of(session_id, false);
  if (!s) return s.error();
  const auto lang = language.empty() ? std::optional<std::string>() : code_language(language);
  if (!language.empty() && !lang)
    return refuse(refusal_kind::invalid,
                  "language " + std::string(language) +
                      " is not supported (known: " + std::string(known_code_languages) + ")");
  auto set = contexts_of(*s.value());
  std::lock_guard g(set->m);
  std::vector<code_context_info> out;
  for (const auto& c : set->all)
    if (!lang || code_language(c->language) == lang) out.push_back(info_of(*c));
  return out;
}

outcome<bool> code_interpreter::remove(const std::string& session_id, const std::string& id) const {
  auto s = session_of(session_id, true);
  if (!s) return s.error();
  auto set = contexts_of(*s.value());
  std::shared_ptr<code_context> gone;
  {
    std::lock_guard g(set->m);
    auto it =
        std::find_if(set->all.begin(), set->all.end(), [&](const auto& c) { return c->id == id; });
    if (it == set->all.end())
      return refuse(refusal_kind::not_found, "context " + id + " not found");
    gone = *it;
    set->all.erase(it);
    for (auto d = set->defaults.begin(); d != set->defaults.end();)
      d = d->second == id ? set->defaults.erase(d) : std::next(d);
  }
  // SIGTERM: the driver shuts its kernel down and exits, a running cell's stream then ends
  // (its run says so); an idle driver's stream is closed here too.
  signal_driver(*s.value(), *gone, "TERM");
  if (std::unique_lock idle(gone->run, std::try_to_lock); idle.owns_lock() && gone->driver)
    gone->driver->close();
  return true;
}

outcome<bool> code_interpreter::remove_language(const std::string& session_id,
                                                std::string_view language) const {
  auto listed = list(session_id, language);
  if (!listed) return listed.error();
  for (const auto& c : listed.value())
    if (auto gone = remove(session_id, c.id); !gone && gone.error().kind != refusal_kind::not_found)
      return gone.error();
  return true;
}

outcome<bool> code_interpreter::interrupt(const std::string& session_id,
                                          const std::string& id) const {
  auto s = session_of(session_id, true);
  if (!s) return s.error();
  auto set = contexts_of(*s.value());
  std::shared_ptr<code_context> c;
  {
    std::lock_guard g(set->m);
    for (const auto& each : set->all)
      if (each->id == id) c = each;
  }
  if (!c) return refuse(refusal_kind::not_found, "context " + id + " not found");
  std::unique_lock idle(c->run, std::try_to_lock);
  if (!idle.owns_lock()) signal_driver(*s.value(), *c, "USR1");  // a cell runs: interrupt it
  return true;
}

}  // namespace dockgate::sidecar
