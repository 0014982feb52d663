#pragma once
// The fields of a request body that widen what a container (or an exec) can do, and the
// value at which each adds nothing: the tables `create_widening_fields` (ContainerCreate,
// and ContainerUpdate's HostConfig fields) and `exec_widening_fields` (ContainerExec).
// See docs/design.md, "Container-create policy".
//
// Invariant: deny by default, decided here once. A field listed here passes only at its
// safe value unless the profile has a rule for it (body_reviewer::default_deny); a field
// that can widen a container and is missing here passes unchecked, so a new dockerd field
// of that kind is added here with its safe value.

#include <cstdint>
#include <string_view>

#include "dockgate/policy/json_value.hpp"

namespace dockgate::policy {

enum class safe_when : std::uint8_t {
  empty,         // absent, "", [] or {}
  absent,        // absent only (MaskedPaths: [] unmasks everything)
  is_false,      // absent or false
  is_zero,       // absent or 0
  not_negative,  // absent or >= 0
  private_ns,    // "" or "private" (PidMode, UTSMode, UsernsMode, Cgroup, CgroupnsMode)
  ipc,           // "", "private", "shareable", "none"
  network,       // "", "default", "bridge", "none"
  security_opt,  // only no-new-privileges (true)
  log_config,    // a local log driver
  isolation,     // "" or "default"
  endpoints,     // only the container's own network (NetworkMode), with empty settings
};

struct widening_field {
  std::string_view path;
  safe_when safe;
};

inline constexpr widening_field create_widening_fields[] = {
    {"Volumes", safe_when::empty},
    {"HostConfig.Binds", safe_when::empty},
    {"HostConfig.ContainerIDFile", safe_when::empty},
    {"HostConfig.LogConfig", safe_when::log_config},
    {"HostConfig.NetworkMode", safe_when::network},
    {"HostConfig.PortBindings", safe_when::empty},
    {"HostConfig.VolumeDriver", safe_when::empty},
    {"HostConfig.VolumesFrom", safe_when::empty},
    {"HostConfig.Mounts", safe_when::empty},
    {"HostConfig.Annotations", safe_when::empty},
    {"HostConfig.CapAdd", safe_when::empty},
    {"HostConfig.CgroupnsMode", safe_when::private_ns},
    {"HostConfig.ExtraHosts", safe_when::empty},
    {"HostConfig.GroupAdd", safe_when::empty},
    {"HostConfig.IpcMode", safe_when::ipc},
    {"HostConfig.Cgroup", safe_when::private_ns},
    {"HostConfig.Links", safe_when::empty},
    {"HostConfig.OomScoreAdj", safe_when::not_negative},
    {"HostConfig.PidMode", safe_when::private_ns},
    {"HostConfig.Privileged", safe_when::is_false},
    {"HostConfig.PublishAllPorts", safe_when::is_false},
    {"HostConfig.SecurityOpt", safe_when::security_opt},
    {"HostConfig.StorageOpt", safe_when::empty},
    {"HostConfig.Tmpfs", safe_when::empty},
    {"HostConfig.UTSMode", safe_when::private_ns},
    {"HostConfig.UsernsMode", safe_when::private_ns},
    {"HostConfig.Sysctls", safe_when::empty},
    {"HostConfig.Runtime", safe_when::empty},
    {"HostConfig.Isolation", safe_when::isolation},
    {"HostConfig.MaskedPaths", safe_when::absent},
    {"HostConfig.ReadonlyPaths", safe_when::absent},
    {"HostConfig.CgroupParent", safe_when::empty},
    {"HostConfig.BlkioWeightDevice", safe_when::empty},
    {"HostConfig.BlkioDeviceReadBps", safe_when::empty},
    {"HostConfig.BlkioDeviceWriteBps", safe_when::empty},
    {"HostConfig.BlkioDeviceReadIOps", safe_when::empty},
    {"HostConfig.BlkioDeviceWriteIOps", safe_when::empty},
    {"HostConfig.CpuRealtimePeriod", safe_when::is_zero},
    {"HostConfig.CpuRealtimeRuntime", safe_when::is_zero},
    {"HostConfig.Devices", safe_when::empty},
    {"HostConfig.DeviceCgroupRules", safe_when::empty},
    {"HostConfig.DeviceRequests", safe_when::empty},
    {"HostConfig.OomKillDisable", safe_when::is_false},
    {"HostConfig.Ulimits", safe_when::empty},
    {"NetworkingConfig.EndpointsConfig", safe_when::endpoints},
};

inline constexpr widening_field exec_widening_fields[] = {
    {"Privileged", safe_when::is_false},
};

// Absent, null, "", [], {}, false or 0: a value that sets nothing.
bool is_empty_value(const json_value* v);

// Whether `v`, the value of a widening field, is its safe value. `root` is the whole body,
// for the fields whose safety depends on another (endpoints on NetworkMode).
bool is_safe(const json_object& root, const json_value* v, safe_when rule);

}  // namespace dockgate::policy
