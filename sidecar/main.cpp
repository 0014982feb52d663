// dockgate-sidecar: the sandbox session service. Configuration from SANDBOX_* variables,
// Docker only through DOCKER_HOST (the gate).
#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <mutex>

#include "dockgate/client/engine.hpp"
#include "dockgate/client/healthcheck.hpp"
#include "dockgate/common/environment.hpp"
#include "dockgate/sidecar/config.hpp"
#include "dockgate/sidecar/service.hpp"
#include "egress/egress_network.hpp"
#include "egress/egress_policy.hpp"
#include "engine/docker_engine.hpp"
#include "fleet/store_lease.hpp"
#include "front/http_server.hpp"
#include "sessions/instance_lease.hpp"
#include "storage/storage.hpp"

namespace {
dockgate::sidecar::http_server* running_server = nullptr;
// The service once it runs, and the store lease (fuse mode): what a lost lease fences
// before the process stops.
std::atomic<dockgate::sidecar::service*> fenced_service{nullptr};
std::atomic<dockgate::sidecar::store_lease*> held_lease{nullptr};
std::mutex stopping;

// A lease was lost: the process stops (exit 1). When the store lease has lapsed too (a
// stall past both: the fleet may take the sessions over, or has), the FUSE sessions'
// containers and mounts here are removed first (session_lifecycle::fence), so that none
// of this holder's processes keeps running; their data is fenced by generation already
// (fleet.cpp). One stop: a second loss waits for the first's exit.
[[noreturn]] void stop_lost(const std::string& what, const std::string& why) {
  std::lock_guard g(stopping);
  auto* lease = held_lease.load();
  const bool fence = lease && lease->lapsed();
  std::cerr << "dockgate-sidecar: the " << what << " was lost (" << why << "): "
            << (fence ? "fencing this host's sessions, then stopping, the sessions left to the "
                        "fleet"
                      : "stopping at once, the sessions left to the sidecar that holds it")
            << std::endl;
  if (auto* svc = fence ? fenced_service.load() : nullptr) {
    const auto fenced = svc->fence_fuse_sessions();
    std::cerr << "dockgate-sidecar: fenced " << fenced
              << " session(s): their containers and mounts removed" << std::endl;
  }
  std::_Exit(1);
}
void on_signal(int) {
  if (running_server) running_server->stop();
}
}  // namespace

int main(int argc, char** argv) {
  using namespace dockgate;
  auto loaded = sidecar::load_config(common::process_environment());
  // The probe of a container's HEALTHCHECK: GET /healthz on this sidecar's listener
  // (SANDBOX_LISTEN's port on loopback) or on the URL given.
  if (argc >= 2 && std::string_view(argv[1]) == "healthcheck") {
    if (argc == 3) return client::healthcheck(argv[2]);
    if (!loaded.value) return 1;
    const auto& listen = loaded.value->listen;
    if (listen.starts_with("unix:")) return client::healthcheck(listen);
    return client::healthcheck("tcp://127.0.0.1:" + listen.substr(listen.rfind(':') + 1));
  }
  if (argc >= 2) {
    std::cerr << "usage: dockgate-sidecar [healthcheck [URL]]  (configuration from SANDBOX_* "
                 "variables)\n";
    return 2;
  }
  for (const auto& e : loaded.errors) std::cerr << "dockgate-sidecar: " << e << '\n';
  if (!loaded.value) return 1;
  std::string error;
  auto engine_config = client::engine_config_from_env(&error);
  if (!engine_config) {
    std::cerr << "dockgate-sidecar: " << error << '\n';
    return 1;
  }
  // SANDBOX_NETWORK=allowlist: each session gets a network of its own. One is made and
  // removed now: if the engine cannot make an internal one (the gate's sandbox-egress
  // profile, the daemon's address pools), no session could have its wall, so the sidecar
  // does not start.
  // The engine (through the gate) for what runs before the service: the probe, the lease.
  const sidecar::docker_engine engine{client::engine(*engine_config)};
  if (loaded.value->network == "allowlist") {
    const std::string probe =
        sidecar::egress_network_name(*loaded.value, "probe-" + loaded.value->instance);
    const auto gateway = sidecar::egress_network(engine, *loaded.value, probe, error);
    // The sessions' lists go to the proxy as files (egress_policy.hpp): one written and
    // removed with the probe's network, so a directory the sidecar cannot write stops it.
    const auto failed =
        gateway.empty() ? std::nullopt : sidecar::write_egress_policy(*loaded.value, gateway, {});
    if (failed) error = *failed;
    sidecar::remove_egress_network(engine, *loaded.value, probe);
    if (gateway.empty() || failed) {
      std::cerr << "dockgate-sidecar: SANDBOX_NETWORK=allowlist: " << error << std::endl;
      return 1;
    }
    std::cerr << "dockgate-sidecar: sessions reach out only through the egress proxy, each on "
                 "its own network ("
              << loaded.value->egress_network << "-<id>, port " << loaded.value->egress_proxy_port
              << ")" << std::endl;
  }
  // The instance's lease first: nothing of the instance is adopted or removed without it
  // (instance_lease.hpp). Another live sidecar holding it is a refusal, the holder named.
  auto lease = sidecar::instance_lease::acquire(engine, *loaded.value, error);
  if (!lease) {
    std::cerr << "dockgate-sidecar: " << error << std::endl;
    return 1;
  }
  std::cerr << "dockgate-sidecar: holding the lease of instance " << loaded.value->instance << " ("
            << lease->holder().describe() << ")" << std::endl;
  lease->start_renewal([](const std::string& why) {
    // Another sidecar may hold this instance's sessions now: stop at once and touch
    // nothing (no session ended, no pool container removed), as a SIGKILL would — unless
    // the store lease lapsed as well (stop_lost).
    stop_lost("instance lease", why);
  });
  // FUSE workspaces: the sessions live in the store, and this instance's hold on them is
  // its store lease (store_lease.hpp), taken before anything is adopted.
  std::unique_ptr<sidecar::fleet_store> store;
  std::unique_ptr<sidecar::store_lease> held;
  struct unpublish_lease {
    ~unpublish_lease() { held_lease = nullptr; }
  } gone_with_held;  // cleared before `held` goes
  if (loaded.value->workspace_mode == "fuse") {
    store = std::make_unique<sidecar::fleet_store>(*loaded.value);
    held = sidecar::store_lease::acquire(*store, *loaded.value, error);
    if (!held) {
      std::cerr << "dockgate-sidecar: " << error << std::endl;
      return 1;
    }
    std::cerr << "dockgate-sidecar: holding the store lease "
              << store->lease_key(loaded.value->instance) << " (holder " << held->holder() << ")"
              << std::endl;
    held_lease = held.get();
    held->start_renewal([](const std::string& why) {
      // Another sidecar may take this instance's sessions over now (or has: this process
      // may have been stalled past its lease): fenced, then stopped (stop_lost).
      stop_lost("store lease", why);
    });
  }
  try {
    sidecar::service svc(*loaded.value, client::engine(*engine_config), held.get());
    svc.reconcile();
    struct unpublish {
      ~unpublish() { fenced_service = nullptr; }
    } gone_with_svc;  // declared after svc: cleared before it is destroyed
    if (held) fenced_service = &svc;
    // Temporaries of archive writes cut short by a kill: older than any write can take.
    if (const auto n = sidecar::remove_stale_temporaries(
            loaded.value->local_storage_dir,
            std::max<std::int64_t>(3600, 2 * loaded.value->archive_timeout_s)))
      std::cerr << "dockgate-sidecar: removed " << n << " stale temporary archive file(s)"
                << std::endl;
    svc.start_reaper();
    svc.start_pool();  // after reconcile(): it removed the pool containers of an earlier run
    sidecar::server_limits limits;
    limits.max_body = [&svc](std::string_view path) { return svc.max_body(path); };
    limits.max_connections = static_cast<std::size_t>(loaded.value->max_connections);
    limits.max_per_peer = static_cast<std::size_t>(loaded.value->max_connections_per_peer);
    limits.head_timeout = std::chrono::seconds(loaded.value->head_timeout_s);
    sidecar::http_server server(
        sidecar::listen_endpoint(loaded.value->listen),
        [&svc](const sidecar::http_request& r) { return svc.handle(r); }, limits);
    running_server = &server;
    std::signal(SIGTERM, on_signal);
    std::signal(SIGINT, on_signal);
    std::signal(SIGPIPE, SIG_IGN);
    std::cerr << "dockgate-sidecar: listening on " << loaded.value->listen << " (port "
              << server.port() << "), docker at " << engine_config->where.endpoint.to_string()
              << (engine_config->where.tls ? " (TLS)" : "") << ", image " << loaded.value->image
              << std::endl;
    server.run();
    running_server = nullptr;
    // The warm pool first: no container is made while the sessions end.
    if (const auto removed = svc.stop_pool())
      std::cerr << "dockgate-sidecar: removed " << removed << " warm pool container(s)"
                << std::endl;
    // Stopped (SIGTERM: docker stop, compose down): no session container outlives its
    // sidecar unless asked (SANDBOX_KEEP_SESSIONS_ON_STOP=1: a restart adopts them).
    if (!loaded.value->keep_sessions_on_stop) {
      const auto kept = svc.end_all_sessions();
      std::cerr << "dockgate-sidecar: stopped; sessions ended"
                << (kept ? " (" + std::to_string(kept) + " kept for the next start)"
                         : std::string())
                << std::endl;
    }
  } catch (const std::exception& e) {
    std::cerr << "dockgate-sidecar: " << e.what() << '\n';
    return 1;  // the lease is released (its destructor): the next start need not wait
  }
  if (held) held->release();  // the fleet may take over what was handed over, at once
  lease->release();           // last: the sessions were ended or left for the next start
  return 0;
}
