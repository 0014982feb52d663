#pragma once
// The sandbox service: the Aivory sidecar's HTTP API (sessions, exec, files, storage) on
// top of the Engine API, reached only through DOCKER_HOST (the gate's sandbox profile).
// `service` answers /healthz, authenticates, routes a call for a session another fleet
// member holds (front/fleet_routing.hpp), and hands the rest to the Aivory front's route
// table (front/aivory/routes.hpp) over the session core (core/session_core.hpp), whose
// rooms each hold their own state and locks.

#include <cstddef>
#include <memory>
#include <optional>
#include <string_view>

#include "dockgate/client/engine.hpp"
#include "dockgate/sidecar/config.hpp"
#include "engine/docker_engine.hpp"
#include "front/http_server.hpp"

namespace dockgate::sidecar {

class store_lease;

class service {
 public:
  // `fleet`: this instance's store lease (SANDBOX_WORKSPACE_MODE=fuse: sessions have
  // records in the store, and calls for sessions held elsewhere are routed: fleet.hpp).
  service(config c, client::engine docker, store_lease* fleet = nullptr);
  ~service();
  service(const service&) = delete;
  service& operator=(const service&) = delete;

  http_reply handle(const http_request& r);
  // Start-up: adopt running session containers left by a previous run, remove the rest.
  void reconcile();
  // Starts the idle reaper thread.
  void start_reaper();
  // Shutdown: every session of this instance archived (where it has storage) and its
  // container removed, as a DELETE would; one whose archive cannot be written now keeps
  // its container for the next start to adopt. Returns how many were kept.
  std::size_t end_all_sessions();
  // The store lease was lost (fuse mode): the FUSE sessions' containers and mounts here
  // are removed, touching no record, before the process stops (session_lifecycle::fence).
  // Returns how many sessions were fenced.
  std::size_t fence_fuse_sessions();
  // The warm pool (SANDBOX_WARM_POOL): start after reconcile(); stop before
  // end_all_sessions() (its unclaimed containers are removed; returns how many).
  void start_pool();
  std::size_t stop_pool();
  std::size_t max_body(std::string_view path) const;

 private:
  http_reply healthz();

  struct rooms;  // the session core and the front's own parts (service.cpp)
  config config_;
  docker_engine engine_;  // the seam to the engine, the real client behind it
  std::unique_ptr<rooms> rooms_;
};

}  // namespace dockgate::sidecar
