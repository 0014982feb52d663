// Each operation of the seam as the one Engine API call it is.
#include "engine/docker_engine.hpp"

#include <string>

namespace dockgate::sidecar {

namespace {
std::string path(std::string_view a, std::string_view b = {}, std::string_view c = {}) {
  std::string p;
  p.reserve(a.size() + b.size() + c.size());
  p.append(a).append(b).append(c);
  return p;
}

// A label filter as the query's JSON ({"label":["<label>"]}), percent-encoded. Labels the
// sidecar sets are [a-z._]: nothing in them needs encoding but the JSON's own characters.
std::string label_filter(std::string_view label) {
  return path("filters=%7B%22label%22%3A%5B%22", label, "%22%5D%7D");
}
}  // namespace

engine_answer docker_engine::version(timeout t) const {
  return docker_.call("GET", "/version", {}, t);
}

engine_answer docker_engine::image_inspect(std::string_view ref, timeout t) const {
  return docker_.call("GET", path("/images/", ref, "/json"), {}, t);
}

engine_answer docker_engine::create(std::string_view name, std::string_view body, timeout t) const {
  return docker_.call("POST", path("/containers/create?name=", name), body, t);
}

engine_answer docker_engine::start(std::string_view id, timeout t) const {
  return docker_.call("POST", path("/containers/", id, "/start"), {}, t);
}

engine_answer docker_engine::inspect(std::string_view id, timeout t) const {
  return docker_.call("GET", path("/containers/", id, "/json"), {}, t);
}

engine_answer docker_engine::list(std::string_view label, bool all, timeout t) const {
  return docker_.call("GET", path("/containers/json?", all ? "all=1&" : "", label_filter(label)),
                      {}, t);
}

engine_answer docker_engine::top(std::string_view id, std::string_view ps_args, timeout t) const {
  return docker_.call("GET", path("/containers/", id, path("/top?ps_args=", ps_args)), {}, t);
}

engine_answer docker_engine::pause(std::string_view id, timeout t) const {
  return docker_.call("POST", path("/containers/", id, "/pause"), {}, t);
}

engine_answer docker_engine::unpause(std::string_view id, timeout t) const {
  return docker_.call("POST", path("/containers/", id, "/unpause"), {}, t);
}

engine_answer docker_engine::remove(std::string_view id, timeout t) const {
  return docker_.call("DELETE", path("/containers/", id, "?force=1"), {}, t);
}

engine_answer docker_engine::network_inspect(std::string_view name, timeout t) const {
  return docker_.call("GET", path("/networks/", name), {}, t);
}

engine_answer docker_engine::network_create(std::string_view body, timeout t) const {
  return docker_.call("POST", "/networks/create", body, t);
}

engine_answer docker_engine::network_remove(std::string_view name, timeout t) const {
  return docker_.call("DELETE", path("/networks/", name), {}, t);
}

client::exec_result docker_engine::exec(std::string_view container,
                                        const client::exec_options& options) const {
  return docker_.exec(container, options);
}

std::optional<client::exec_stream> docker_engine::exec_attach(
    std::string_view container, const std::vector<std::string>& cmd, std::string_view user,
    client::clock_type::time_point deadline, std::string* error) const {
  return docker_.exec_attach(container, cmd, user, deadline, error);
}

}  // namespace dockgate::sidecar
