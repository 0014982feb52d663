// libFuzzer target: the container-create canonicaliser under the shipped sandbox policy.
// Oracles: total (never crashes), every rewrite is valid JSON that re-reviews to itself
// with no changes (idempotence), and the sandbox invariants hold in every accepted body.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "dockgate/policy/body_review.hpp"
#include "dockgate/policy/go_json.hpp"
#include "sandbox_policy.inc"  // kSandboxPolicy: compose/policies/sandbox.json, embedded

using namespace dockgate::policy;

namespace {
const profile& sandbox() {
  static const policy p = *parse_policy(kSandboxPolicy).value;
  return p.default_();
}
const json_value* at(const json_value& root, std::string_view path) {
  const json_value* v = &root;
  while (v) {
    auto dot = path.find('.');
    if (!v->as_object()) return nullptr;
    v = find(*v->as_object(), path.substr(0, dot));
    if (dot == std::string_view::npos) break;
    path.remove_prefix(dot + 1);
  }
  return v;
}
void require(bool ok) {
  if (!ok) std::abort();
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  auto first = review_container_create(sandbox(), body);
  const auto* rw = std::get_if<rewrite>(&first);
  if (!rw) return 0;
  auto second = review_container_create(sandbox(), rw->body);
  const auto* again = std::get_if<rewrite>(&second);
  require(again && again->body == rw->body && again->changes.empty());
  auto decoded = decode_body(rw->body, schema::container_create);
  require(decoded.value.has_value());
  const json_value& root = *decoded.value;
  require(*at(root, "User") == json_value("65534:65534"));
  require(*at(root, "HostConfig.Privileged") == json_value(false));
  require(*at(root, "HostConfig.ReadonlyRootfs") == json_value(true));
  require(*at(root, "HostConfig.NetworkMode") == json_value("none"));
  require(to_json(*at(root, "HostConfig.CapDrop")) == R"(["ALL"])");
  // no-new-privileges, then the profile's own seccomp profile, and nothing else.
  require(
      *at(root, "HostConfig.SecurityOpt") ==
      json_value(json_array{json_value("no-new-privileges"), json_value(sandbox().rules.seccomp)}));
  const json_value* caps = at(root, "HostConfig.CapAdd");
  require(!caps || caps->as_array()->empty());
  for (const char* absent :
       {"HostConfig.Devices", "HostConfig.Sysctls", "HostConfig.MaskedPaths",
        "HostConfig.ReadonlyPaths", "HostConfig.DeviceRequests", "HostConfig.PortBindings"}) {
    const json_value* v = at(root, absent);
    require(!v || (v->as_array() && v->as_array()->empty()) ||
            (v->as_object() && v->as_object()->empty()));
  }
  // No client binds; the only mount is the workspace bind from the profile's root.
  const json_value* binds = at(root, "HostConfig.Binds");
  require(!binds || (binds->as_array() && binds->as_array()->empty()));
  if (const json_value* mounts = at(root, "HostConfig.Mounts"); mounts && mounts->as_array()) {
    require(mounts->as_array()->size() <= 1);
    for (const auto& m : *mounts->as_array()) {
      const std::string source = *at(m, "Source")->as_string();
      require(*at(m, "Type") == json_value("bind") &&
              *at(m, "Target") == json_value("/workspace") &&
              source.starts_with(sandbox().rules.workspace->root + "/") &&
              source.find("/..") == std::string::npos);
    }
  }
  const auto memory = at(root, "HostConfig.Memory")->as_int();
  require(memory && *memory > 0 && *memory <= 2147483648);
  require(to_json(*at(root, "HostConfig.LogConfig")) ==
          R"({"Type":"json-file","Config":{"max-file":"3","max-size":"10m"}})");
  return 0;
}
