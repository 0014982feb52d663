// Commands: a client's shell commands in a session's container, as OpenSandbox's execd runs
// them (research note §2: `sh -c`, its own process group, stdin /dev/null).
//
// Invariants it keeps:
// - Every exec runs as the session user (labels.hpp session_user), never the container's
//   own user: a command can touch nothing a cell could not.
// - No kill sweep after a command: an OpenSandbox sandbox keeps its processes between
//   commands (a server started by one command is reached by the next).
// - The session's lock is not held for a command's run: a command is checked against the
//   registry (found, not ending, not frozen: a paused sandbox answers conflict at once and
//   never hangs on a frozen exec) and then runs beside the others, as execd's do.
// - A command runs in its own process group (setsid) and its timeout kills that whole
//   group from inside the container: an exec's own deadline only drops the client's
//   stream, the process it started lives on in the container.
// - A background command's state lives in the container, under a directory of the session
//   user's (/tmp/.dockgate-commands/<id>: pid = process group, content, started_at, log,
//   finished_at, exit), so a restarted sidecar still answers for it. A command id is hex
//   only (valid_command_id), so it never names another path.
#include "commands/commands.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <sstream>
#include <utility>
#include <vector>

#include "engine/labels.hpp"
#include "sessions/session.hpp"
#include "sessions/session_registry.hpp"
#include "util/ids.hpp"
#include "util/util.hpp"

namespace dockgate::sidecar {

using namespace std::chrono_literals;

namespace {

// What a wrapper writes on stderr, alone, when the cwd is not a directory (exit 200): the
// command never started.
constexpr std::string_view cwd_marker = "dockgate:cwd-missing";
constexpr int cwd_exit = 200;
constexpr int unknown_exit = 44;  // a state script's "no such command"

// sh -c <this> sh CWD TIMEOUT_SECONDS COMMAND ID   (TIMEOUT_SECONDS "0": none)
// The command in a session of its own (setsid(1) without a fork: a background child of a
// non-interactive sh is never a group leader, so the group's id is $!), the watchdog
// killing that group at the timeout (or the process alone if it has not yet made its
// group). `kill -9 -PGID`, never `kill -KILL -- -PGID`: dash reads `--` as a pid and
// busybox refuses it after -s; this form is what dash, bash and busybox all read. While it
// runs its group is recorded as a background command's is (DELETE /command?id= and status
// reach it); the record goes when it ends.
constexpr std::string_view foreground_script = R"sh(
if [ -n "$1" ]; then cd -- "$1" 2>/dev/null || { printf '%s' 'dockgate:cwd-missing' >&2; exit 200; }; fi
setsid sh -c "$3" </dev/null &
p=$!; w=; d=/tmp/.dockgate-commands/$4
if (umask 077; mkdir -p "$d") 2>/dev/null; then
  echo "$p" > "$d/pid"; printf '%s' "$3" > "$d/content"; date -u +%Y-%m-%dT%H:%M:%SZ > "$d/started_at"
else d=; fi
if [ "$2" != 0 ]; then (sleep "$2"; kill -9 "-$p" || kill -9 "$p") </dev/null >/dev/null 2>&1 & w=$!; fi
wait "$p"; rc=$?
if [ -n "$w" ]; then kill "$w" 2>/dev/null; fi
if [ -n "$d" ]; then rm -rf "$d"; fi
exit "$rc"
)sh";

// sh -c <this> sh ID CWD TIMEOUT_SECONDS COMMAND CAP: the state directory made, the command
// started detached (every descriptor away from the exec, whose stream then ends), its pid
// (= its process group) recorded before the exec returns. Its output reaches the log
// through a FIFO whose reader (awk, line by line, each line flushed as it comes: mawk
// reads a FIFO at once only with -W interactive) keeps lines while they fit in CAP bytes
// (SANDBOX_MAX_OUTPUT_BYTES), then one line saying the rest was dropped, and drains the
// rest (a writer never blocks); an image without awk keeps it all. A FIFO, not a
// pipeline: the command's end is its own process's, not that of the last writer of its
// output (an app it left running holds the FIFO open).
constexpr std::string_view background_script = R"sh(
umask 077; b=/tmp/.dockgate-commands
mkdir -p "$b" && mkdir "$b/$1" || exit 201
d="$b/$1"
if [ -n "$2" ]; then cd -- "$2" 2>/dev/null || { rm -rf "$d"; printf '%s' 'dockgate:cwd-missing' >&2; exit 200; }; fi
printf '%s' "$4" > "$d/content"
date -u +%Y-%m-%dT%H:%M:%SZ > "$d/started_at"
setsid sh -c '
d=$1; w=
if [ "$2" != 0 ]; then (sleep "$2"; date -u +%Y-%m-%dT%H:%M:%SZ > "$d/finished_at"; echo 137 > "$d/exit"; kill -9 -$$) & w=$!; fi
mkfifo "$d/out" || exit 202
if awk -W interactive "BEGIN{}" </dev/null >/dev/null 2>&1; then a="awk -W interactive"; else a=awk; fi
if command -v awk >/dev/null 2>&1; then
  $a -v max="$4" "{ n += length(\$0) + 1; if (n <= max) { print; fflush() } else if (!cut) { printf \"[dockgate: output past %s bytes dropped]\\n\", max; fflush(); cut = 1 } }" < "$d/out" > "$d/log" 2>/dev/null &
else cat < "$d/out" > "$d/log" & fi
sh -c "$3" > "$d/out" 2>&1 </dev/null
rc=$?
if [ -n "$w" ]; then kill "$w" 2>/dev/null; fi
date -u +%Y-%m-%dT%H:%M:%SZ > "$d/finished_at"; echo "$rc" > "$d/exit"
' sh "$d" "$3" "$4" "$5" </dev/null >/dev/null 2>&1 &
echo $! > "$d/pid"
)sh";

// sh -c <this> sh ID: running (1/0), the exit code ("" while running; 137 when killed
// from outside), started_at, finished_at, then the command's text.
constexpr std::string_view status_script = R"sh(
d=/tmp/.dockgate-commands/$1
[ -f "$d/content" ] || exit 44
if [ -f "$d/exit" ]; then echo 0; cat "$d/exit"
elif p=$(cat "$d/pid") && { kill -0 "-$p" || kill -0 "$p"; } 2>/dev/null; then echo 1; echo
else echo 0; echo 137; fi
cat "$d/started_at"; cat "$d/finished_at" 2>/dev/null || echo
cat "$d/content"
)sh";

// sh -c <this> sh ID CURSOR MAX: the log from line CURSOR (0-based), at most MAX bytes.
constexpr std::string_view logs_script = R"sh(
d=/tmp/.dockgate-commands/$1
[ -f "$d/content" ] || exit 44
[ -f "$d/log" ] || exit 0
tail -n "+$(($2 + 1))" "$d/log" | head -c "$3"
)sh";

// sh -c <this> sh ID: its end recorded (unless it had ended), then its group killed. In
// that order: a foreground command's wrapper removes the record as soon as its group dies,
// and a write after the kill could land between that removal's unlinks and its rmdir,
// leaving a stale record behind.
constexpr std::string_view kill_script = R"sh(
d=/tmp/.dockgate-commands/$1
[ -f "$d/content" ] || exit 44
[ -f "$d/exit" ] && exit 0
p=$(cat "$d/pid") || exit 44
date -u +%Y-%m-%dT%H:%M:%SZ > "$d/finished_at"; echo 137 > "$d/exit"
{ kill -9 "-$p" || kill -9 "$p"; } 2>/dev/null
exit 0
)sh";

// The cgroup (v2) of the container as seen from inside: CPUs online, cpu.max's quota
// and period, cpu.stat's usage twice 100 ms apart, memory.max, memory.current, and
// MemTotal (kB) for a container without a memory limit.
constexpr std::string_view metrics_script = R"sh(
c=/sys/fs/cgroup
u1=$(sed -n 's/^usage_usec //p' $c/cpu.stat); sleep 0.1; u2=$(sed -n 's/^usage_usec //p' $c/cpu.stat)
m=$(cat $c/cpu.max 2>/dev/null || echo max 100000)
echo "$(nproc) $m ${u1:-0} ${u2:-0} $(cat $c/memory.max 2>/dev/null || echo max) $(cat $c/memory.current 2>/dev/null || echo 0) $(sed -n 's/^MemTotal: *\([0-9]*\) kB/\1/p' /proc/meminfo)"
)sh";

// sh -c <this> sh ID CWD: a shell's state made (its cwd: CWD, else the container's).
constexpr std::string_view shell_create_script = R"sh(
umask 077; b=/tmp/.dockgate-shells
mkdir -p "$b" && mkdir "$b/$1" || exit 201
if [ -n "$2" ]; then cd -- "$2" 2>/dev/null || { rm -rf "$b/$1"; exit 200; }; fi
pwd > "$b/$1/cwd"; : > "$b/$1/env"
)sh";

// sh -c <this> sh ID: the shell's saved cwd (exit 44: no such shell).
constexpr std::string_view shell_cwd_script = R"sh(
[ -f "/tmp/.dockgate-shells/$1/cwd" ] || exit 44
cat "/tmp/.dockgate-shells/$1/cwd"
)sh";

constexpr std::string_view shell_delete_script = R"sh(
[ -f "/tmp/.dockgate-shells/$1/cwd" ] || exit 44
rm -rf "/tmp/.dockgate-shells/$1"
)sh";

// What runs a command in a shell: its exported variables restored, the command eval'ed in
// that same shell (a `cd` or an `export` stays), then its cwd and exports saved.
std::string in_shell(const std::string& id, const std::string& command) {
  const std::string d = shell_quote("/tmp/.dockgate-shells/" + id);
  return "__dg_d=" + d + "; . \"$__dg_d/env\"; eval " + shell_quote(command) +
         "\n__dg_rc=$?; pwd > \"$__dg_d/cwd\"; export -p > \"$__dg_d/env.new\" && "
         "mv \"$__dg_d/env.new\" \"$__dg_d/env\"; exit $__dg_rc";
}

// Seconds with milliseconds, as sleep(1) reads them ("0": none).
std::string seconds_of(const std::optional<std::int64_t>& ms) {
  if (!ms) return "0";
  std::ostringstream s;
  s << *ms / 1000 << '.' << (*ms % 1000) / 100 << (*ms % 100) / 10 << *ms % 10;
  return s.str();
}

std::vector<std::string> env_of(const std::map<std::string, std::string>& envs) {
  std::vector<std::string> env;
  for (const auto& [k, v] : envs) env.push_back(k + "=" + v);
  return env;
}

// Holds back the cwd marker (the first output, alone on stderr) until the exit says
// whether it was the wrapper's; forwards everything else as it comes.
struct marker_filter {
  command_events& events;
  bool any = false;
  std::string held;
  void operator()(int stream, std::string_view data) {
    if (!any && stream == 2 && data == cwd_marker) {
      held = std::string(data);
    } else {
      if (!held.empty()) events.output(2, std::exchange(held, {}));
      events.output(stream, data);
    }
    any = true;
  }
};

std::string next_line(std::string_view& text) {
  const auto nl = text.find('\n');
  std::string line(text.substr(0, nl));
  text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
  return line;
}

}  // namespace

bool valid_command_id(std::string_view id) {
  return !id.empty() && id.size() <= 64 && std::all_of(id.begin(), id.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
  });
}

outcome<std::shared_ptr<session>> commands::session_of(const std::string& session_id) const {
  auto s = registry_.find(session_id);
  if (!s || s->terminating) return refuse(refusal_kind::not_found, "sandbox not found");
  if (s->paused) return refuse(refusal_kind::conflict, "sandbox is paused");
  s->last_used = std::chrono::steady_clock::now();
  return s;
}

outcome<std::string> commands::container_of(const std::string& session_id) const {
  auto s = session_of(session_id);
  if (!s) return s.error();
  return s.value()->container;
}

client::exec_result commands::exec(const std::string& container, std::vector<std::string> cmd,
                                   std::chrono::milliseconds timeout,
                                   std::vector<std::string> env) const {
  client::exec_options o;
  o.cmd = std::move(cmd);
  o.env = std::move(env);
  o.user = session_user;
  o.timeout = timeout;
  o.max_stdout = static_cast<std::size_t>(config_.max_body_bytes);
  o.max_stderr = 64 * 1024;
  return engine_.exec(container, o);
}

outcome<command_finished> commands::run(const command_run& r, command_events& events) const {
  auto s = session_of(r.session_id);
  if (!s) return s.error();
  const std::string id = random_hex(16);
  const std::string container = s.value()->container;
  events.started(id);
  marker_filter filter{events, false, {}};
  bool interrupted = false;
  client::exec_options o;
  o.cmd = {"sh",      "-c", std::string(foreground_script), "sh", r.cwd, seconds_of(r.timeout_ms),
           r.command, id};
  o.env = env_of(r.envs);
  o.user = session_user;
  // The exec's own deadline only in case the watchdog cannot act (a frozen container).
  o.timeout = r.timeout_ms ? std::chrono::milliseconds(*r.timeout_ms) + 10s
                           : std::chrono::milliseconds(24h);
  o.max_stdout = o.max_stderr = static_cast<std::size_t>(config_.max_output_bytes);
  // The client went away: the command's group is killed, as execd kills it.
  auto kill_if_gone = [&] {
    if (!interrupted && !events.listening()) {
      interrupted = true;
      exec(container, {"sh", "-c", std::string(kill_script), "sh", id}, 30s);
    }
  };
  o.on_output = [&](int stream, std::string_view data) {
    filter(stream, data);
    s.value()->last_used = std::chrono::steady_clock::now();  // busy, not idle
    kill_if_gone();
  };
  o.idle_every = 3s;
  o.on_idle = [&] {
    s.value()->last_used = std::chrono::steady_clock::now();
    events.idle();
    kill_if_gone();
  };
  const auto begun = std::chrono::steady_clock::now();
  auto done = engine_.exec(container, o);
  s.value()->last_used = std::chrono::steady_clock::now();
  command_finished f;
  f.took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                 begun);
  f.exit_code = done.exit_code;
  if (!done.started) {
    f.start_error = "exec failed: " + done.error;
  } else if (done.exit_code == cwd_exit && !filter.held.empty()) {
    f.start_error = "cwd " + r.cwd + ": no such directory";
  } else if (!filter.held.empty()) {
    events.output(2, filter.held);
  }
  f.timed_out =
      done.timed_out || (r.timeout_ms && done.exit_code == 137 && f.took.count() >= *r.timeout_ms);
  return f;
}

outcome<std::string> commands::start(const command_run& r) const {
  auto container = container_of(r.session_id);
  if (!container) return container.error();
  const std::string id = random_hex(16);
  auto done = exec(container.value(),
                   {"sh", "-c", std::string(background_script), "sh", id, r.cwd,
                    seconds_of(r.timeout_ms), r.command, std::to_string(config_.max_output_bytes)},
                   30s, env_of(r.envs));
  if (!done.started) return refuse(refusal_kind::engine_failed, "exec failed: " + done.error);
  if (done.exit_code == cwd_exit)
    return refuse(refusal_kind::invalid, "cwd " + r.cwd + ": no such directory");
  if (done.exit_code != 0)
    return refuse(refusal_kind::failed, "background start failed: " + done.stderr_data);
  return id;
}

outcome<command_status> commands::status(const std::string& session_id,
                                         const std::string& id) const {
  if (!valid_command_id(id)) return refuse(refusal_kind::not_found, "command not found");
  auto container = container_of(session_id);
  if (!container) return container.error();
  auto done = exec(container.value(), {"sh", "-c", std::string(status_script), "sh", id}, 30s);
  if (!done.started) return refuse(refusal_kind::engine_failed, "exec failed: " + done.error);
  if (done.exit_code == unknown_exit) return refuse(refusal_kind::not_found, "command not found");
  if (done.exit_code != 0)
    return refuse(refusal_kind::failed, "status failed: " + done.stderr_data);
  std::string_view out = done.stdout_data;
  command_status st;
  st.id = id;
  st.running = next_line(out) == "1";
  if (auto code = next_line(out); !code.empty())
    st.exit_code = std::strtoll(code.c_str(), nullptr, 10);
  st.started_at = next_line(out);
  st.finished_at = next_line(out);
  st.content = std::string(out);
  return st;
}

outcome<command_logs> commands::logs(const std::string& session_id, const std::string& id,
                                     std::int64_t cursor) const {
  if (!valid_command_id(id)) return refuse(refusal_kind::not_found, "command not found");
  if (cursor < 0) return refuse(refusal_kind::invalid, "cursor must be >= 0");
  auto container = container_of(session_id);
  if (!container) return container.error();
  auto done = exec(container.value(),
                   {"sh", "-c", std::string(logs_script), "sh", id, std::to_string(cursor),
                    std::to_string(config_.max_body_bytes)},
                   30s);
  if (!done.started) return refuse(refusal_kind::engine_failed, "exec failed: " + done.error);
  if (done.exit_code == unknown_exit) return refuse(refusal_kind::not_found, "command not found");
  command_logs l;
  l.text = std::move(done.stdout_data);
  // Every line returned counts, a last one without its newline too (the SDK asks again
  // from the cursor it is given).
  l.next_cursor = cursor + std::count(l.text.begin(), l.text.end(), '\n') +
                  (!l.text.empty() && l.text.back() != '\n' ? 1 : 0);
  return l;
}

outcome<command_killed> commands::kill(const std::string& session_id, const std::string& id) const {
  if (!valid_command_id(id)) return refuse(refusal_kind::not_found, "command not found");
  auto container = container_of(session_id);
  if (!container) return container.error();
  auto done = exec(container.value(), {"sh", "-c", std::string(kill_script), "sh", id}, 30s);
  if (!done.started) return refuse(refusal_kind::engine_failed, "exec failed: " + done.error);
  if (done.exit_code == unknown_exit) return refuse(refusal_kind::not_found, "command not found");
  return command_killed{};
}

outcome<std::string> commands::create_shell(const std::string& session_id,
                                            const std::string& cwd) const {
  auto container = container_of(session_id);
  if (!container) return container.error();
  const std::string id = random_hex(16);
  auto done =
      exec(container.value(), {"sh", "-c", std::string(shell_create_script), "sh", id, cwd}, 30s);
  if (!done.started) return refuse(refusal_kind::engine_failed, "exec failed: " + done.error);
  if (done.exit_code == cwd_exit)
    return refuse(refusal_kind::invalid, "cwd " + cwd + ": no such directory");
  if (done.exit_code != 0)
    return refuse(refusal_kind::failed, "session create failed: " + done.stderr_data);
  return id;
}

outcome<command_finished> commands::run_in_shell(const std::string& shell_id, command_run r,
                                                 command_events& events) const {
  if (!valid_command_id(shell_id)) return refuse(refusal_kind::not_found, "session not found");
  auto container = container_of(r.session_id);
  if (!container) return container.error();
  auto saved =
      exec(container.value(), {"sh", "-c", std::string(shell_cwd_script), "sh", shell_id}, 30s);
  if (!saved.started) return refuse(refusal_kind::engine_failed, "exec failed: " + saved.error);
  if (saved.exit_code != 0) return refuse(refusal_kind::not_found, "session not found");
  if (r.cwd.empty()) r.cwd = saved.stdout_data.substr(0, saved.stdout_data.find('\n'));
  r.command = in_shell(shell_id, r.command);
  return run(r, events);
}

outcome<command_killed> commands::delete_shell(const std::string& session_id,
                                               const std::string& shell_id) const {
  if (!valid_command_id(shell_id)) return refuse(refusal_kind::not_found, "session not found");
  auto container = container_of(session_id);
  if (!container) return container.error();
  auto done =
      exec(container.value(), {"sh", "-c", std::string(shell_delete_script), "sh", shell_id}, 30s);
  if (!done.started) return refuse(refusal_kind::engine_failed, "exec failed: " + done.error);
  if (done.exit_code != 0) return refuse(refusal_kind::not_found, "session not found");
  return command_killed{};
}

outcome<sandbox_metrics> commands::metrics(const std::string& session_id) const {
  auto container = container_of(session_id);
  if (!container) return container.error();
  auto done = exec(container.value(), {"sh", "-c", std::string(metrics_script)}, 30s);
  if (!done.started) return refuse(refusal_kind::engine_failed, "exec failed: " + done.error);
  std::istringstream in(done.stdout_data);
  std::int64_t cpus = 0, period = 100000, u1 = 0, u2 = 0, mem_current = 0, mem_total_kb = 0;
  std::string quota, mem_max;
  if (!(in >> cpus >> quota >> period >> u1 >> u2 >> mem_max >> mem_current))
    return refuse(refusal_kind::failed, "metrics unreadable: " + done.stderr_data);
  in >> mem_total_kb;
  sandbox_metrics m;
  m.cpu_count = cpus;
  if (quota != "max" && period > 0)
    m.cpu_count = std::min<std::int64_t>(
        cpus, static_cast<std::int64_t>(std::ceil(std::strtod(quota.c_str(), nullptr) / period)));
  m.cpu_count = std::max<std::int64_t>(m.cpu_count, 1);
  // usage_usec over 100 ms: microseconds of CPU per 1000 is a percent of one CPU.
  m.cpu_used_pct = static_cast<double>(std::max<std::int64_t>(u2 - u1, 0)) / 1000.0 /
                   static_cast<double>(m.cpu_count);
  m.mem_total_mib = mem_max == "max" ? static_cast<double>(mem_total_kb) / 1024.0
                                     : std::strtod(mem_max.c_str(), nullptr) / 1048576.0;
  m.mem_used_mib = static_cast<double>(mem_current) / 1048576.0;
  return m;
}

}  // namespace dockgate::sidecar
