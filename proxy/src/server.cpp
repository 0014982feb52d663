// The server: its threads (shards), accept loops (at the connection limit), the metrics
// listener, signals (SIGTERM/SIGINT graceful shutdown, SIGHUP policy reload), the
// watchdogs; the listeners themselves are opened in listeners.cpp.
//
// Threads: each shard is one thread with its own io_context and proxy_context (context.hpp).
// The first shard runs on the main thread and also owns the listeners, the signals and
// the metrics listener; its accept loops hand each accepted client to the shards in turn,
// and the client's connection is made and served on that shard's thread only. What one
// thread does to another shard (a reload's policy, shutdown, a metrics scrape) it posts
// to that shard's io_context.
#include "dockgate/proxy/server.hpp"

#include <malloc.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <chrono>
#include <limits>
#include <mutex>
#include <random>
#include <stdexcept>
#include <thread>

#include "connection.hpp"
#include "context.hpp"
#include "listeners.hpp"
#include "thread_count.hpp"
#include "tls_front.hpp"
#include "upstream_tls.hpp"

namespace dockgate::proxy {

namespace {

struct shard {
  shard(const serve_options& o, std::shared_ptr<const policy::policy> p, protocol::endpoint u,
        std::shared_ptr<spdlog::logger> l, audit_sink& a, process_state& shared)
      : ctx(o, std::move(p), std::move(u), std::move(l), a, shared), watchdog(ioc) {
    ctx.watchdog = &watchdog;
  }
  // Declared before the io_context: a stopped io_context destroys the coroutines still in
  // it (connections whose destructors use their context), so the context must outlive it.
  proxy_context ctx;
  net::io_context ioc{1};  // run by this shard's thread only
  net::steady_timer watchdog;
};
using shards = std::vector<std::unique_ptr<shard>>;

// Runs `f(ctx)` on every shard's own thread (the first's too, later, from its own loop).
template <typename F>
void on_every_shard(shards& all, const F& f) {
  for (auto& s : all) net::post(s->ioc, [&ctx = s->ctx, f] { f(ctx); });
}

// At the connection limit a gate listener is not served: new clients wait in the
// kernel's backlog instead of being accepted and starved of descriptors. (Not the metrics
// listener: the operator must see the limit.)
net::awaitable<void> below_connection_limit(proxy_context& ctx, listener& l) {
  bool warned = false;
  const auto connections_at_limit = [&ctx] {
    return ctx.process.open_connections.load(std::memory_order_relaxed) >= ctx.max_connections;
  };
  const auto descriptors_at_limit = [&ctx] {
    return ctx.process.descriptors.load(std::memory_order_relaxed) +
               ctx.descriptors_per_connection >
           ctx.descriptor_budget;
  };
  while ((connections_at_limit() || descriptors_at_limit()) && !ctx.stopping) {
    if (!warned && connections_at_limit())
      ctx.log->warn("connection limit {} reached on {}: not accepting until one closes",
                    ctx.max_connections, l.address.to_string());
    else if (!warned)
      ctx.log->warn(
          "descriptor limit reached on {} ({} connections, {} of {} descriptors): not "
          "accepting until one closes",
          l.address.to_string(), ctx.process.open_connections.load(std::memory_order_relaxed),
          ctx.process.descriptors.load(std::memory_order_relaxed), ctx.descriptor_budget);
    warned = true;
    net::steady_timer wait(l.socket.get_executor(), std::chrono::milliseconds(10));
    co_await wait.async_wait(use_tuple);
  }
}

// Accepts on the first shard's thread; the client goes to the next shard in turn, its
// socket already registered with that shard's io_context.
net::awaitable<void> accept_loop(shards& all, listener& l) {
  proxy_context& ctx = all.front()->ctx;
  const bool is_unix = l.address.scheme == common::endpoint::kind::unix_socket;
  std::size_t turn = 0;
  for (;;) {
    co_await below_connection_limit(ctx, l);
    shard& to = *all[turn];
    auto [ec, socket] =
        co_await l.socket.async_accept(net::any_io_executor(to.ioc.get_executor()), use_tuple);
    if (!ec && l.tls && !ctx.stopping) {
      turn = (turn + 1) % all.size();
      net::post(to.ioc,
                [&to, &tls = *l.tls, socket = std::move(socket),
                 slot = connection_slot(ctx.process, ctx.descriptors_per_connection)]() mutable {
                  net::co_spawn(to.ioc, serve_tls(to.ctx, tls, std::move(socket), std::move(slot)),
                                net::detached);
                });
      continue;
    }
    if (ctx.stopping) co_return;
    if (ec) {
      if (ec == net::error::operation_aborted) co_return;
      // EMFILE and friends: back off a little instead of spinning.
      ctx.log->warn("accept on {}: {}", l.address.to_string(), ec.message());
      net::steady_timer t(l.socket.get_executor(), std::chrono::milliseconds(100));
      co_await t.async_wait(use_tuple);
      continue;
    }
    turn = (turn + 1) % all.size();
    policy::client_identity identity;
    audit_client who;
    std::string client = peer_identity(socket, is_unix, identity, who);
    net::post(to.ioc, [&to, socket = std::move(socket),
                       slot = connection_slot(ctx.process, ctx.descriptors_per_connection),
                       client = std::move(client), identity = std::move(identity),
                       json = format_audit_client(who)]() mutable {
      auto c = std::make_unique<connection>(to.ctx, std::move(slot), std::move(socket),
                                            std::move(client), identity, std::move(json));
      net::co_spawn(to.ioc, connection::start(std::move(c)), net::detached);
    });
  }
}

// Every shard's metrics summed: the others' copied on their own threads.
net::awaitable<metrics> all_metrics(shards& all) {
  metrics sum = all.front()->ctx.stats;
  for (std::size_t i = 1; i < all.size(); ++i) {
    proxy_context& other = all[i]->ctx;
    sum.add(co_await net::co_spawn(
        all[i]->ioc, [&other]() -> net::awaitable<metrics> { co_return other.stats; },
        net::use_awaitable));
  }
  co_return sum;
}

// The metrics listener: one request per connection, GET /metrics or GET /healthz.
net::awaitable<bool> daemon_answers(proxy_context& ctx, const net::any_io_executor& ex) {
  beast::basic_stream<protocol> upstream(ex);
  upstream_socket tls_upstream;  // tls:// only: the relay lives while this holds it
  if (ctx.upstream_tls) {
    if (!(co_await connect_tls_upstream(ctx, tls_upstream, std::chrono::seconds(2))).empty())
      co_return false;
    upstream.socket() = std::move(*tls_upstream);
  }
  upstream.expires_after(std::chrono::seconds(2));
  if (!ctx.upstream_tls) {
    auto [cec] = co_await upstream.async_connect(ctx.upstream, use_tuple);
    if (cec) co_return false;
  }
  static constexpr std::string_view ping =
      "GET /_ping HTTP/1.1\r\nHost: docker\r\nConnection: close\r\n\r\n";
  auto [wec, wn] = co_await net::async_write(upstream, net::buffer(ping), use_tuple);
  if (wec) co_return false;
  char buf[64];
  std::size_t got = 0;
  while (got < 12) {
    auto [rec, rn] =
        co_await upstream.async_read_some(net::buffer(buf + got, sizeof buf - got), use_tuple);
    if (rec || rn == 0) break;
    got += rn;
  }
  co_return got >= 12 && std::string_view(buf, got).substr(9, 3) == "200";
}

net::awaitable<void> serve_metrics(shards& all, protocol::socket socket) {
  proxy_context& ctx = all.front()->ctx;
  beast::basic_stream<protocol> stream(std::move(socket));
  stream.expires_after(std::chrono::seconds(10));
  std::string request;
  char buf[1024];
  while (request.find("\r\n\r\n") == std::string::npos && request.size() < 8192) {
    auto [ec, n] = co_await stream.async_read_some(net::buffer(buf), use_tuple);
    if (ec || n == 0) co_return;
    request.append(buf, n);
  }
  const std::string_view line = std::string_view(request).substr(0, request.find("\r\n"));
  unsigned status = 404;
  std::string type = "application/json",
              body = R"({"message":"not found: GET /metrics or /healthz"})";
  if (line.starts_with("GET /metrics ")) {
    ctx.stats.daemon_up(co_await daemon_answers(ctx, stream.get_executor()));  // at most 2 s
    status = 200;
    type = "text/plain; version=0.0.4; charset=utf-8";
    metrics sum = co_await all_metrics(all);
    sum.audit_sinks(ctx.audit.health());
    body = sum.render();
  } else if (line.starts_with("GET /healthz ")) {
    const bool up = co_await daemon_answers(ctx, stream.get_executor());
    status = up ? 200 : 503;
    body = up ? R"({"status":"ok","daemon":"answers"})"
              : R"({"status":"unhealthy","daemon":"does not answer"})";
  }
  std::string response = "HTTP/1.1 " + std::to_string(status) +
                         (status == 200   ? " OK"
                          : status == 503 ? " Service Unavailable"
                                          : " Not Found") +
                         "\r\nContent-Type: " + type +
                         "\r\nContent-Length: " + std::to_string(body.size()) +
                         "\r\nConnection: close\r\n\r\n" + body;
  co_await net::async_write(stream, net::buffer(response), use_tuple);
  beast::error_code ignored;
  stream.socket().shutdown(net::socket_base::shutdown_send, ignored);
}

net::awaitable<void> metrics_loop(shards& all, listener& l) {
  proxy_context& ctx = all.front()->ctx;
  for (;;) {
    auto [ec, socket] = co_await l.socket.async_accept(use_tuple);
    if (ctx.stopping || ec == net::error::operation_aborted) co_return;
    if (ec) continue;
    net::co_spawn(l.socket.get_executor(), serve_metrics(all, std::move(socket)), net::detached);
  }
}

// Runs on the first shard: stops accepting, lets every shard's connections finish (to the
// deadline), then ends every shard's watchdog, after which the threads run out of work.
net::awaitable<void> shutdown_when_signalled(shards& all, net::signal_set& signals,
                                             net::signal_set& hangup,
                                             std::vector<listener>& listeners) {
  proxy_context& ctx = all.front()->ctx;
  auto [ec, signo] = co_await signals.async_wait(use_tuple);
  if (ec) co_return;
  ctx.log->info("signal {}: shutting down (deadline {} ms)", signo,
                ctx.options.shutdown_timeout.count());
  ctx.stopping = true;  // this thread's accept loops see it at once
  beast::error_code ignored_hangup;
  hangup.cancel(ignored_hangup);  // no reloads while stopping (and no work left for the loop)
  for (auto& l : listeners) {
    beast::error_code ignored;
    l.socket.close(ignored);
  }
  on_every_shard(all, [](proxy_context& c) {
    c.stopping = true;
    c.idle_upstreams.clear();  // idle daemon connections go now; busy ones are not given back
    for (auto* x : std::vector<connection*>(c.connections.begin(), c.connections.end()))
      x->shutdown();
  });
  // Every slot is given back once its connection (or TLS handshake) has ended.
  auto open = [&ctx] { return ctx.process.open_connections.load(std::memory_order_relaxed); };
  const auto deadline = std::chrono::steady_clock::now() + ctx.options.shutdown_timeout;
  net::steady_timer timer(signals.get_executor());
  while (open() > 0 && std::chrono::steady_clock::now() < deadline) {
    timer.expires_after(std::chrono::milliseconds(20));
    co_await timer.async_wait(use_tuple);
  }
  if (open() > 0) {
    ctx.log->warn("shutdown deadline passed: closing {} connection(s)", open());
    on_every_shard(all, [](proxy_context& c) {
      for (auto* x : std::vector<connection*>(c.connections.begin(), c.connections.end()))
        x->abort();
      for (auto* h : std::vector<stream*>(c.tls_handshakes.begin(), c.tls_handshakes.end()))
        h->close();  // a TLS client still in its handshake
    });
  }
  // The watchdogs end once the aborted connections are gone; let them look now.
  while (open() > 0) {
    timer.expires_after(std::chrono::milliseconds(5));
    co_await timer.async_wait(use_tuple);
  }
  on_every_shard(all, [](proxy_context& c) { c.watchdog->cancel(); });
}

// The one timer of the request path: about once a second every connection's deadline is
// looked at (a store on the request path, no timer system call per request), the audit
// lines of that second are written, and memory a load left behind goes back to the system.
net::awaitable<void> watch_deadlines(proxy_context& ctx, net::steady_timer& timer) {
  std::size_t peak = 0;  // connections at most since the last trim
  std::vector<connection*> live;
  while (!(ctx.stopping && ctx.connections.empty())) {
    timer.expires_after(std::chrono::seconds(1));
    co_await timer.async_wait(use_tuple);
    const auto now = std::chrono::steady_clock::now();
    ctx.audit.flush();
    live.assign(ctx.connections.begin(), ctx.connections.end());
    for (auto* c : live) c->check_deadline(now);
    ctx.idle_upstreams.expire(now);
    const std::size_t n = ctx.connections.size();
    peak = std::max(peak, n);
    // Busy: the pool keeps what the last second needed. Quiet for a second (no block in
    // use at any time: idle keep-alive connections and held streams alike hold none) with
    // blocks or heads cached, or most of a crowd of connections gone: their memory goes
    // back. (A burst between two looks, such as 1000 streams opened in 0.4 s, is seen:
    // the pool keeps its high-water mark.)
    if (!ctx.buffers.quiet()) {
      if (ctx.buffers.settle()) ::malloc_trim(0);  // a burst has passed
    } else if (ctx.buffers.cached() > 0 || !ctx.spare_heads.empty() || n * 2 + 16 < peak) {
      ctx.buffers.trim();
      ctx.spare_heads.clear();
      peak = n;
    }
    if (live.capacity() > 4 * n + 64) live.shrink_to_fit();
  }
}

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

// What the process may serve: --max-connections, and the descriptors its connections may
// hold, within RLIMIT_NOFILE.
struct connection_limits {
  std::size_t connections;       // --max-connections, else no number of its own
  std::size_t descriptors;       // the budget of the connections' (and shared streams') sockets
  std::uint32_t per_connection;  // a client and its socket to the daemon
  std::size_t guaranteed() const { return std::min(connections, descriptors / per_connection); }
};

// Raises the soft descriptor limit to the hard one and derives how many descriptors the
// connections may hold: each may hold its client's socket and one to the daemon; a held
// events stream that shares the daemon's stream of others (events_hub.hpp) its client's
// only, so more of those fit than of connections of their own.
connection_limits connection_limit(const serve_options& options, std::size_t threads,
                                   spdlog::logger& log) {
  rlimit rl{};
  ::getrlimit(RLIMIT_NOFILE, &rl);
  if (rl.rlim_cur < rl.rlim_max) {
    rlimit raised = rl;
    raised.rlim_cur = rl.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) rl = raised;
  }
  // Listeners, logs, the metrics listener, start-up probes; and each thread's event loop
  // (epoll, its eventfd, its timerfd).
  connection_limits limits{};
  // A tls:// upstream costs three: the socketpair's two ends and the TCP socket.
  limits.per_connection = options.upstream.scheme == common::endpoint::kind::tls ? 4 : 2;
  // And each thread's idle daemon connections (upstream_pool.hpp).
  const rlim_t reserved = 64 + 3 * static_cast<rlim_t>(threads) +
                          upstream_pool::idle_cap * (limits.per_connection - 1) * threads;
  const rlim_t fds = std::min<rlim_t>(rl.rlim_cur, 1 << 22);
  limits.descriptors =
      fds > reserved ? static_cast<std::size_t>(fds - reserved) : limits.per_connection;
  limits.connections =
      options.max_connections ? options.max_connections : std::numeric_limits<std::size_t>::max();
  log.info(
      "file descriptors: {} (hard limit {}): serving up to {} connections, more where held "
      "event streams share the daemon's (one descriptor each)",
      static_cast<unsigned long long>(rl.rlim_cur), static_cast<unsigned long long>(rl.rlim_max),
      limits.guaranteed());
  return limits;
}

// SIGHUP: the audit queues written and file sinks opened again at their paths; the policy read
// again; a valid one applies to new requests, an invalid one, or one a user other than root could
// have changed (host_path.hpp), is refused (the reason logged) and the current one stays.
net::awaitable<void> reload_when_signalled(shards& all, net::signal_set& signals,
                                           const policy_loader& load) {
  proxy_context& ctx = all.front()->ctx;
  for (;;) {
    auto [ec, signo] = co_await signals.async_wait(use_tuple);
    if (ec || ctx.stopping) co_return;
    ctx.audit.reopen();
    auto fresh = load();
    ctx.stats.policy_reload(fresh.has_value(), unix_now());
    if (!fresh) {
      ctx.log->error(
          "SIGHUP: the policy was not loaded (the reason above); keeping the current one");
      continue;
    }
    auto applied = std::make_shared<const policy::policy>(std::move(*fresh));
    ctx.policy = applied;  // this thread's at once, the others' when they next run
    on_every_shard(all, [applied](proxy_context& c) { c.policy = applied; });
    ctx.log->info("SIGHUP: policy reloaded ({} profile(s), default {}); it applies to new requests",
                  applied->profiles.size(),
                  applied->default_profile ? applied->default_().name : std::string("none"));
  }
}

int serve(const serve_options& options, policy::policy initial, const policy_loader& reload) {
  auto shared_policy = std::make_shared<const policy::policy>(std::move(initial));
  const policy::policy& pol = *shared_policy;
  auto log = spdlog::stderr_logger_mt("dockgate-proxy");
  log->set_level(spdlog::level::from_str(options.log_level));
  // Every --audit sink opens now, or the gate does not start (audit_sink.hpp).
  std::vector<std::unique_ptr<audit_output>> outputs;
  for (const auto& t : options.audit) {
    std::string error;
    outputs.push_back(open_audit_output(t, options, error));
    if (!outputs.back()) throw std::runtime_error("--audit " + t.spec + ": " + error);
  }
  audit_sink audit(std::move(outputs), options.audit_blocking, *log);
  process_state process;
  const std::size_t threads = options.threads ? options.threads : default_thread_count();
  const std::uint32_t request_id_prefix = std::random_device{}();  // getrandom(2)
  const connection_limits limits = connection_limit(options, threads, *log);
  // The TLS contexts outlive the shards, whose connections use them.
  std::unique_ptr<upstream_tls_config> upstream_tls;
  if (options.upstream.scheme == common::endpoint::kind::tls)
    upstream_tls = make_upstream_tls(options);  // throws: a start-up error
  std::unique_ptr<net::ssl::context> tls;
  if (!options.tls_cert.empty()) tls = make_tls_context(options);
  const protocol::endpoint upstream = [&] {
    net::io_context once;  // resolved once, at start, for every shard
    return resolve(once, options.upstream);
  }();
  shards all;
  for (std::size_t i = 0; i < threads; ++i) {
    all.push_back(std::make_unique<shard>(options, shared_policy, upstream, log, audit, process));
    proxy_context& c = all.back()->ctx;
    c.upstream_tls = upstream_tls.get();
    c.request_id_prefix = request_id_prefix + static_cast<std::uint32_t>(i);
    c.max_connections = limits.connections;
    c.descriptor_budget = limits.descriptors;
    c.descriptors_per_connection = limits.per_connection;
  }
  net::io_context& ioc = all[0]->ioc;
  proxy_context& ctx = all[0]->ctx;
  ctx.stats.connection_limit(limits.guaranteed());
  ctx.stats.policy_loaded(unix_now());

  std::vector<listener> listeners;
  listeners.reserve(options.listen.size() +
                    1);  // + the metrics listener: no reallocation under the loops
  for (const auto& address : options.listen) {
    listeners.push_back(
        listener{address, acceptor(ioc),
                 address.scheme == common::endpoint::kind::tls ? tls.get() : nullptr});
    open_listener(listeners.back(), ioc, options);
  }
  if (options.metrics) {
    listeners.push_back(listener{*options.metrics, acceptor(ioc), nullptr});
    open_listener(listeners.back(), ioc, options);
  }
  // Every listener is open: only now does any of them accept (listeners.hpp).
  for (auto& l : listeners) start_listening(l);
  const std::size_t gate_listeners = options.listen.size();
  for (std::size_t i = 0; i < gate_listeners; ++i) {
    log->info("listening on {}{} ({} profile(s), default {}), upstream {}",
              listeners[i].address.to_string(),
              listeners[i].socket_ino == 0 &&
                      listeners[i].address.scheme == common::endpoint::kind::unix_socket
                  ? " (from systemd)"
                  : "",
              pol.profiles.size(), pol.default_profile ? pol.default_().name : std::string("none"),
              options.upstream.to_string());
    net::co_spawn(ioc, accept_loop(all, listeners[i]), net::detached);
  }
  if (options.metrics) {
    log->info("metrics and health on {}", options.metrics->to_string());
    net::co_spawn(ioc, metrics_loop(all, listeners.back()), net::detached);
  }

  net::signal_set signals(ioc, SIGINT, SIGTERM);
  net::signal_set hangup(ioc, SIGHUP);
  net::co_spawn(ioc, shutdown_when_signalled(all, signals, hangup, listeners), net::detached);
  net::co_spawn(ioc, reload_when_signalled(all, hangup, reload), net::detached);
  for (auto& s : all) net::co_spawn(s->ioc, watch_deadlines(s->ctx, s->watchdog), net::detached);
  ::signal(SIGPIPE, SIG_IGN);
  log->info("serving with {} thread(s)", threads);
  // The other shards run until the first one is done: until then a scrape or a shutdown
  // may still post to them. What one thread throws (or a thread that cannot be started)
  // stops every shard; it is thrown again here once all are joined.
  std::exception_ptr failure;
  std::mutex failure_mutex;
  auto fail = [&](std::exception_ptr e) {
    {
      const std::lock_guard lock(failure_mutex);
      if (!failure) failure = std::move(e);
    }
    for (auto& s : all) s->ioc.stop();
  };
  {
    std::vector<std::jthread> workers;
    std::vector<net::executor_work_guard<net::io_context::executor_type>> busy;
    try {
      for (std::size_t i = 1; i < all.size(); ++i) {
        busy.push_back(net::make_work_guard(all[i]->ioc));
        workers.emplace_back([&s = *all[i], &fail] {
          try {
            s.ioc.run();
          } catch (...) {
            fail(std::current_exception());
          }
        });
      }
      ioc.run();
    } catch (...) {
      fail(std::current_exception());
    }
    busy.clear();
  }  // the threads end once their shard has no work left (or is stopped), joined here
  if (failure) std::rethrow_exception(failure);
  audit.flush();

  for (const auto& l : listeners) {
    if (l.address.scheme != common::endpoint::kind::unix_socket) continue;
    struct stat now {};
    if (::lstat(l.address.path.c_str(), &now) == 0 && now.st_dev == l.socket_dev &&
        now.st_ino == l.socket_ino)
      ::unlink(l.address.path.c_str());
  }
  log->info("stopped");
  return 0;
}

}  // namespace dockgate::proxy
