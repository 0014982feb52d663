#pragma once
// The session core's one way to the engine: the Engine API operations the sidecar uses,
// by name. The program passes a docker_engine (docker_engine.hpp: the real client,
// reaching the daemon through DOCKER_HOST, the gate); unit tests pass a fake that keeps
// containers in memory (tests/sidecar/fake_engine.hpp). Answers are the Engine API's
// own (status and JSON body), so what the core reads from them is what a daemon says.
// Internal to the sidecar library.

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dockgate/client/engine.hpp"

namespace dockgate::sidecar {

using engine_answer = client::http_response;

class container_engine {
 public:
  using timeout = std::chrono::milliseconds;
  virtual ~container_engine() = default;

  // GET /version
  virtual engine_answer version(timeout t) const = 0;
  // GET /images/{ref}/json
  virtual engine_answer image_inspect(std::string_view ref, timeout t) const = 0;

  // POST /containers/create?name={name}, the body as given.
  virtual engine_answer create(std::string_view name, std::string_view body, timeout t) const = 0;
  // POST /containers/{id}/start
  virtual engine_answer start(std::string_view id, timeout t) const = 0;
  // GET /containers/{id}/json
  virtual engine_answer inspect(std::string_view id, timeout t) const = 0;
  // GET /containers/json?all=…&filters={"label":[label]}: the containers carrying `label`.
  virtual engine_answer list(std::string_view label, bool all, timeout t) const = 0;
  // GET /containers/{id}/top?ps_args={ps_args}
  virtual engine_answer top(std::string_view id, std::string_view ps_args, timeout t) const = 0;
  // POST /containers/{id}/pause, /unpause
  virtual engine_answer pause(std::string_view id, timeout t) const = 0;
  virtual engine_answer unpause(std::string_view id, timeout t) const = 0;
  // DELETE /containers/{id}?force=1
  virtual engine_answer remove(std::string_view id, timeout t) const = 0;

  // GET /networks/{name}, POST /networks/create, DELETE /networks/{name}
  virtual engine_answer network_inspect(std::string_view name, timeout t) const = 0;
  virtual engine_answer network_create(std::string_view body, timeout t) const = 0;
  virtual engine_answer network_remove(std::string_view name, timeout t) const = 0;

  // An exec run to its end, its output captured (client::engine::exec).
  virtual client::exec_result exec(std::string_view container,
                                   const client::exec_options& options) const = 0;
  // An exec whose stdin and output stay open (a cell runner, a kernel driver, a lease's
  // holder): the held stream, or nullopt with *error set.
  virtual std::optional<client::exec_stream> exec_attach(std::string_view container,
                                                         const std::vector<std::string>& cmd,
                                                         std::string_view user,
                                                         client::clock_type::time_point deadline,
                                                         std::string* error) const = 0;
};

}  // namespace dockgate::sidecar
