// The sidecar's side of the in-container cell runner: framing, strict parsing, caps.
// See runner.hpp for the invariant (nothing from the container is trusted).
#include "cells/runner.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>

#include "engine/container_engine.hpp"
#include "engine/labels.hpp"
#include "util/util.hpp"

namespace dockgate::sidecar {

namespace {

void put_u32(std::string& out, std::uint32_t v) {
  out += static_cast<char>((v >> 24) & 0xff);
  out += static_cast<char>((v >> 16) & 0xff);
  out += static_cast<char>((v >> 8) & 0xff);
  out += static_cast<char>(v & 0xff);
}

// The Docker frames one read may carry: the runner writes at most 64 KiB + 5 per frame,
// which the daemon may split but never joins past its own 32 KiB copy buffer.
constexpr std::size_t max_docker_payload = max_runner_frame;

}  // namespace

std::optional<runner_frames::frame> runner_frames::next() {
  if (failed_ || buffer_.size() < runner_frame_header) return std::nullopt;
  const auto* h = reinterpret_cast<const unsigned char*>(buffer_.data());
  const std::size_t size =
      (std::size_t(h[1]) << 24) | (std::size_t(h[2]) << 16) | (std::size_t(h[3]) << 8) | h[4];
  kind type;
  switch (h[0]) {
    case 'H':
      type = kind::hello;
      break;
    case 'S':
      type = kind::started;
      break;
    case 'O':
      type = kind::out;
      break;
    case 'E':
      type = kind::err;
      break;
    case 'X':
      type = kind::exit;
      break;
    case 'L':
      type = kind::listing;
      break;
    case 'D':
      type = kind::done;
      break;
    case 'K':
      type = kind::status;
      break;
    case 'V':
      type = kind::value;
      break;
    case 'F':
      type = kind::fault;
      break;
    default:
      failed_ = true;
      return std::nullopt;
  }
  if (size > max_runner_frame - runner_frame_header) {
    failed_ = true;
    return std::nullopt;
  }
  if (buffer_.size() < runner_frame_header + size) return std::nullopt;
  frame f{type, buffer_.substr(runner_frame_header, size)};
  buffer_.erase(0, runner_frame_header + size);
  return f;
}

std::optional<runner_exit> parse_runner_exit(std::string_view payload) {
  runner_exit e;
  auto number = [&](auto& out, bool last) {
    const char* end = payload.data() + payload.size();
    if (payload.empty() || payload.front() < '0' || payload.front() > '9') return false;
    auto [ptr, ec] = std::from_chars(payload.data(), end, out);
    if (ec != std::errc{} || (ptr - payload.data() > 1 && payload.front() == '0')) return false;
    payload.remove_prefix(static_cast<std::size_t>(ptr - payload.data()));
    if (last) return payload.empty();
    if (payload.empty() || payload.front() != ' ') return false;
    payload.remove_prefix(1);
    return true;
  };
  if (!number(e.code, false) || !number(e.out_dropped, false) || !number(e.err_dropped, true))
    return std::nullopt;
  // An exit status is 0-255 (a signal already folded into 128 + n).
  if (e.code < 0 || e.code > 255) return std::nullopt;
  return e;
}

std::optional<int> parse_runner_hello(std::string_view payload) {
  constexpr std::string_view prefix = "dockgate-runner 2 ";
  if (!payload.starts_with(prefix)) return std::nullopt;
  payload.remove_prefix(prefix.size());
  int pid = 0;
  const char* end = payload.data() + payload.size();
  auto [ptr, ec] = std::from_chars(payload.data(), end, pid);
  if (payload.empty() || payload.front() < '1' || payload.front() > '9' || ec != std::errc{} ||
      ptr != end)
    return std::nullopt;
  return pid;
}

runner_state parse_runner_stat(std::string_view line) {
  // "<pid> (<comm>) <state> ...": the comm may hold ") " itself, the fields after it not.
  const auto cut = line.rfind(") ");
  if (cut == std::string_view::npos || cut + 2 >= line.size()) return runner_state::unknown;
  switch (line[cut + 2]) {
    case 'R':
    case 'S':
    case 'D':
    case 'I':
      return runner_state::running;
    case 'T':  // stopped by a signal
    case 't':  // stopped under a tracer
      return runner_state::stopped;
    case 'Z':
    case 'X':
      return runner_state::gone;
    default:
      return runner_state::unknown;
  }
}

std::string runner_request(char op, std::uint32_t cap,
                           const std::vector<std::vector<std::string_view>>& lists) {
  std::string body(1, op);
  put_u32(body, cap);
  put_u32(body, static_cast<std::uint32_t>(lists.size()));
  for (const auto& list : lists) {
    put_u32(body, static_cast<std::uint32_t>(list.size()));
    for (const auto item : list) {
      put_u32(body, static_cast<std::uint32_t>(item.size()));
      body += item;
    }
  }
  std::string out;
  put_u32(out, static_cast<std::uint32_t>(body.size()));
  return out + body;
}

std::shared_ptr<cell_runner> cell_runner::start(const container_engine& engine,
                                                const std::string& container,
                                                std::chrono::milliseconds timeout,
                                                std::string* error) {
  const auto deadline = client::clock_type::now() + timeout;
  // -I: no user site, no PYTHON* variables, no script directory on sys.path: nothing
  // the session's files can change is imported before the runner is in place.
  auto stream = engine.exec_attach(
      container, {"python3", "-I", "-c", std::string(runner_program), "dockgate-runner"},
      session_user, deadline, error);
  if (!stream) return nullptr;
  std::shared_ptr<cell_runner> runner(new cell_runner(std::move(*stream)));
  std::string why;
  bool timed_out = false;
  auto hello = runner->next(deadline, why, timed_out);
  std::optional<int> pid;
  if (!hello || hello->type != runner_frames::kind::hello ||
      !(pid = parse_runner_hello(hello->payload))) {
    *error = hello ? "unexpected first frame" : why;
    return nullptr;
  }
  runner->pid_ = *pid;
  return runner;
}

std::shared_ptr<cell_runner> cell_runner::start_program(
    const container_engine& engine, const std::string& container, std::vector<std::string> argv,
    const std::function<std::optional<int>(std::string_view)>& parse_hello,
    std::chrono::milliseconds timeout, std::string* error, std::string* hello_payload) {
  const auto deadline = client::clock_type::now() + timeout;
  auto stream = engine.exec_attach(container, argv, session_user, deadline, error);
  if (!stream) return nullptr;
  std::shared_ptr<cell_runner> runner(new cell_runner(std::move(*stream)));
  std::string why;
  bool timed_out = false;
  auto hello = runner->next(deadline, why, timed_out);
  if (hello && hello->type == runner_frames::kind::hello) *hello_payload = hello->payload;
  std::optional<int> pid;
  if (!hello || hello->type != runner_frames::kind::hello || !(pid = parse_hello(hello->payload))) {
    *error = hello ? "unexpected first frame" : why;
    return nullptr;
  }
  runner->pid_ = *pid;
  return runner;
}

std::optional<runner_frames::frame> cell_runner::next(client::clock_type::time_point deadline,
                                                      std::string& why, bool& timed_out) {
  for (;;) {
    if (auto f = frames_.next()) return f;
    if (frames_.failed()) {
      why = "malformed or oversized frame";
      return std::nullopt;
    }
    client::exec_stream::read_error error;
    auto docker_frame = stream_->read(deadline, max_docker_payload, error);
    if (!docker_frame) {
      using e = client::exec_stream::read_error;
      why = error == e::eof         ? "end of stream"
            : error == e::deadline  ? "deadline"
            : error == e::oversized ? "oversized stream frame"
                                    : "malformed stream frame";
      timed_out = error == e::deadline;
      return std::nullopt;
    }
    // The runner's own stderr is /dev/null once it runs: anything there is a fault.
    if (docker_frame->stream != 1) {
      why = "output on the runner's stderr";
      return std::nullopt;
    }
    // next() refuses a header announcing more than max_runner_frame as soon as it is
    // whole, so what is buffered stays under one frame plus one read.
    frames_.feed(docker_frame->data);
  }
}

cell_runner::waiting cell_runner::from_now(const patience& p,
                                           std::chrono::milliseconds answer_by) const {
  const auto now = client::clock_type::now();
  return {now + std::min(answer_by, p.hard), now + p.hard, p.probe ? &p.probe : nullptr};
}

std::optional<runner_frames::frame> cell_runner::next(waiting& w, std::string& why, bool& timed_out,
                                                      runner_state& found) {
  if (w.looked || !w.probe) return next(w.hard, why, timed_out);
  if (auto f = next(w.answer_by, why, timed_out)) return f;
  if (!timed_out || client::clock_type::now() >= w.hard) return std::nullopt;
  // A sound runner would have answered by now: look at its process. Only one found
  // running is waited for further; a read cut by a deadline leaves the stream whole.
  w.looked = true;
  found = (*w.probe)(pid_);
  if (found == runner_state::stopped || found == runner_state::gone) {
    why = found == runner_state::stopped ? "the runner was stopped" : "the runner had ended";
    timed_out = false;  // not the command's time: the runner's fault
    return std::nullopt;
  }
  timed_out = false;
  return next(w.hard, why, timed_out);
}

namespace {

std::uint32_t wire_cap(std::size_t cap) {
  return static_cast<std::uint32_t>(std::min<std::size_t>(cap, 1u << 31));
}

std::vector<std::string_view> views(const std::vector<std::string>& v) {
  return {v.begin(), v.end()};
}

}  // namespace

cell_runner::run_result cell_runner::exchange(
    const std::string& request, std::size_t cap, const patience& wait,
    const std::function<void(int, std::string_view)>& on_output, bool structured) {
  run_result r;
  if (!stream_) {
    r.why = "runner closed";
    return r;
  }
  auto fail = [&](outcome state, std::string why) {
    r.state = state;
    r.why = std::move(why);
    close();
    return std::move(r);
  };
  // The acknowledgement comes as soon as the command's process exists (within 5 s, and
  // never later than a sound runner's answer); the rest by the command's own limits (the
  // caller's patience). Both ask the caller's probe, which outlives them.
  waiting ack_wait =
      from_now(wait, std::min<std::chrono::milliseconds>(std::chrono::seconds(5), wait.answer_by));
  waiting w = from_now(wait);
  if (!stream_->write(request, w.hard)) return fail(outcome::not_started, "write failed");
  std::string why;
  bool timed_out = false;
  auto ack = next(ack_wait, why, timed_out, r.found);
  if (!ack) return fail(outcome::not_started, why);
  if (ack->type != runner_frames::kind::started || !ack->payload.empty())
    return fail(outcome::lost, "unexpected frame");
  r.result.started = true;
  std::size_t values_kept = 0;
  for (;;) {
    auto f = next(w, why, timed_out, r.found);
    if (!f) {
      r.result.timed_out = timed_out;
      return fail(outcome::lost, why);
    }
    if (f->type == runner_frames::kind::out || f->type == runner_frames::kind::err) {
      const bool is_err = f->type == runner_frames::kind::err;
      std::string& out = is_err ? r.result.stderr_data : r.result.stdout_data;
      const std::size_t room = out.size() < cap ? cap - out.size() : 0;
      const std::size_t keep = std::min(room, f->payload.size());
      out.append(f->payload, 0, keep);
      (is_err ? r.result.stderr_dropped : r.result.stdout_dropped) += f->payload.size() - keep;
      if (keep && on_output)
        on_output(is_err ? 2 : 1, std::string_view(f->payload).substr(0, keep));
      continue;
    }
    if (structured &&
        (f->type == runner_frames::kind::value || f->type == runner_frames::kind::fault)) {
      // A result or an error of a kept kernel's cell: whole frames (each under
      // max_runner_frame), at most `cap` bytes of them all; the rest dropped.
      const bool keep = values_kept + f->payload.size() <= cap;
      if (keep) values_kept += f->payload.size();
      if (keep && on_output)
        on_output(f->type == runner_frames::kind::value ? output_value : output_fault, f->payload);
      continue;
    }
    if (f->type != runner_frames::kind::exit) return fail(outcome::lost, "unexpected frame");
    auto e = parse_runner_exit(f->payload);
    if (!e) return fail(outcome::lost, "malformed exit frame");
    r.result.exit_code = e->code;
    // What it dropped past the cap is only ever added to what was dropped here.
    r.result.stdout_dropped += e->out_dropped;
    r.result.stderr_dropped += e->err_dropped;
    r.state = outcome::done;
    return r;
  }
}

cell_runner::run_result cell_runner::run(
    const std::vector<std::string>& argv, std::string_view stdin_data, std::size_t cap,
    const patience& wait, const std::function<void(int, std::string_view)>& on_output) {
  return exchange(runner_request('R', wire_cap(cap), {views(argv), {stdin_data}}), cap, wait,
                  on_output);
}

bool cell_runner::await_warm_up(const patience& wait) {
  // Answered as a command (started, then exit) once the warm-up has ended; its status
  // says whether the fork server is on, which either way leaves a runner that serves.
  return exchange(runner_request('W', 0, {}), 0, wait, nullptr).state == outcome::done;
}

cell_runner::cell_result cell_runner::run_cell(
    const runner_cell& c, std::size_t cap, const patience& wait,
    const std::function<void(int, std::string_view)>& on_output, std::size_t listing_cap,
    const patience& cleanup) {
  std::vector<std::vector<std::string_view>> lists{
      views(c.argv), {c.code}, {c.cell, c.before_file, c.oom_file, c.outputs}, views(c.sweep)};
  if (!c.fork_timeout_ms.empty() && !c.pair_after_ms.empty())
    lists.push_back({c.fork_timeout_ms, c.pair_after_ms});
  else if (!c.fork_timeout_ms.empty())
    lists.push_back({c.fork_timeout_ms});
  return run_request(runner_request('C', wire_cap(cap), lists), cap, wait, on_output, listing_cap,
                     cleanup, nullptr);
}

cell_runner::cell_result cell_runner::run_request(
    const std::string& request, std::size_t cap, const patience& wait,
    const std::function<void(int, std::string_view)>& on_output, std::size_t listing_cap,
    const patience& cleanup, std::string* status, bool structured) {
  cell_result out;
  if (status) status->clear();
  out.run = exchange(request, cap, wait, on_output, structured);
  out.exited = client::clock_type::now();
  if (out.run.state != outcome::done) return out;
  waiting w = from_now(cleanup);
  std::string listing, why;
  bool timed_out = false, status_seen = false;
  for (;;) {
    auto f = next(w, why, timed_out, out.cleanup_found);
    // The clean-up's listing: pieces up to `listing_cap` (the rest dropped, as the plain
    // clean-up's capped output), then done; a kernel driver's one status frame before it.
    if (f && f->type == runner_frames::kind::status && status && !status_seen && listing.empty()) {
      status_seen = true;
      *status = std::move(f->payload);
      continue;
    }
    if (f && f->type == runner_frames::kind::listing) {
      listing.append(
          f->payload, 0,
          std::min(f->payload.size(), listing_cap - std::min(listing_cap, listing.size())));
      continue;
    }
    if (f && f->type == runner_frames::kind::done && f->payload.empty()) {
      out.listing = std::move(listing);
      return out;
    }
    out.run.why = f ? "unexpected frame" : why;
    close();
    return out;
  }
}

}  // namespace dockgate::sidecar
