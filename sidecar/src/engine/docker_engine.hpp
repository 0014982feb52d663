#pragma once
// The real engine behind the session core's seam: each operation one Engine API call
// through client::engine (DOCKER_HOST: the gate). Internal to the sidecar library.

#include "dockgate/client/engine.hpp"
#include "engine/container_engine.hpp"

namespace dockgate::sidecar {

class docker_engine final : public container_engine {
 public:
  explicit docker_engine(client::engine docker) : docker_(std::move(docker)) {}

  engine_answer version(timeout t) const override;
  engine_answer image_inspect(std::string_view ref, timeout t) const override;
  engine_answer create(std::string_view name, std::string_view body, timeout t) const override;
  engine_answer start(std::string_view id, timeout t) const override;
  engine_answer inspect(std::string_view id, timeout t) const override;
  engine_answer list(std::string_view label, bool all, timeout t) const override;
  engine_answer top(std::string_view id, std::string_view ps_args, timeout t) const override;
  engine_answer pause(std::string_view id, timeout t) const override;
  engine_answer unpause(std::string_view id, timeout t) const override;
  engine_answer remove(std::string_view id, timeout t) const override;
  engine_answer network_inspect(std::string_view name, timeout t) const override;
  engine_answer network_create(std::string_view body, timeout t) const override;
  engine_answer network_remove(std::string_view name, timeout t) const override;
  client::exec_result exec(std::string_view container,
                           const client::exec_options& options) const override;
  std::optional<client::exec_stream> exec_attach(std::string_view container,
                                                 const std::vector<std::string>& cmd,
                                                 std::string_view user,
                                                 client::clock_type::time_point deadline,
                                                 std::string* error) const override;

  const client::engine& client() const { return docker_; }

 private:
  client::engine docker_;
};

}  // namespace dockgate::sidecar
