// Docker's request body structs, as dockerd 20.10 (API 1.41) and newer decode them, from
// the Engine API specifications and moby's api/types. Field names are the JSON names; kinds say how
// Go decodes them.
#include "dockgate/policy/go_json.hpp"

namespace dockgate::policy::schema {

namespace {
using k = field_kind;
constexpr bool ptr = true;

constexpr field_spec health_config_fields[] = {
    {"Test", k::string_list, nullptr, ptr},
    {"Interval", k::int64},
    {"Timeout", k::int64},
    {"Retries", k::int64},
    {"StartPeriod", k::int64},
    {"StartInterval", k::int64},
};
constexpr object_spec health_config{"Healthcheck", health_config_fields};

constexpr field_spec log_config_fields[] = {{"Type", k::string},
                                            {"Config", k::string_map, nullptr, ptr}};
constexpr object_spec log_config{"LogConfig", log_config_fields};

constexpr field_spec restart_policy_fields[] = {{"Name", k::string},
                                                {"MaximumRetryCount", k::int64}};
constexpr object_spec restart_policy{"RestartPolicy", restart_policy_fields};

constexpr field_spec port_binding_fields[] = {{"HostIp", k::string}, {"HostPort", k::string}};
constexpr object_spec port_binding{"PortBinding", port_binding_fields};

constexpr field_spec weight_device_fields[] = {{"Path", k::string},
                                               {"Weight", k::uint64, nullptr, false, 65535}};
constexpr object_spec weight_device{"WeightDevice", weight_device_fields};

constexpr field_spec throttle_device_fields[] = {{"Path", k::string}, {"Rate", k::uint64}};
constexpr object_spec throttle_device{"ThrottleDevice", throttle_device_fields};

constexpr field_spec device_mapping_fields[] = {
    {"PathOnHost", k::string}, {"PathInContainer", k::string}, {"CgroupPermissions", k::string}};
constexpr object_spec device_mapping{"DeviceMapping", device_mapping_fields};

constexpr field_spec device_request_fields[] = {
    {"Driver", k::string},
    {"Count", k::int64},
    {"DeviceIDs", k::string_list, nullptr, ptr},
    {"Capabilities", k::string_list_list, nullptr, ptr},
    {"Options", k::string_map, nullptr, ptr},
};
constexpr object_spec device_request{"DeviceRequest", device_request_fields};

constexpr field_spec ulimit_fields[] = {
    {"Name", k::string}, {"Hard", k::int64}, {"Soft", k::int64}};
constexpr object_spec ulimit{"Ulimit", ulimit_fields};

constexpr field_spec driver_config_fields[] = {{"Name", k::string},
                                               {"Options", k::string_map, nullptr, ptr}};
constexpr object_spec driver_config{"DriverConfig", driver_config_fields};

constexpr field_spec bind_options_fields[] = {
    {"Propagation", k::string},
    {"NonRecursive", k::boolean},
    {"CreateMountpoint", k::boolean},
    {"ReadOnlyNonRecursive", k::boolean},
    {"ReadOnlyForceRecursive", k::boolean},
};
constexpr object_spec bind_options{"BindOptions", bind_options_fields};

constexpr field_spec volume_options_fields[] = {
    {"NoCopy", k::boolean},
    {"Labels", k::string_map, nullptr, ptr},
    {"DriverConfig", k::object, &driver_config, ptr},
    {"Subpath", k::string},
};
constexpr object_spec volume_options{"VolumeOptions", volume_options_fields};

constexpr field_spec image_options_fields[] = {{"Subpath", k::string}};
constexpr object_spec image_options{"ImageOptions", image_options_fields};

constexpr field_spec tmpfs_options_fields[] = {{"SizeBytes", k::int64},
                                               {"Mode", k::uint64, nullptr, false, 0xffffffff},
                                               {"Options", k::string_list_list, nullptr, ptr}};
constexpr object_spec tmpfs_options{"TmpfsOptions", tmpfs_options_fields};

constexpr field_spec mount_fields[] = {
    {"Type", k::string},
    {"Source", k::string},
    {"Target", k::string},
    {"ReadOnly", k::boolean},
    {"Consistency", k::string},
    {"BindOptions", k::object, &bind_options, ptr},
    {"VolumeOptions", k::object, &volume_options, ptr},
    {"ImageOptions", k::object, &image_options, ptr},
    {"TmpfsOptions", k::object, &tmpfs_options, ptr},
};
constexpr object_spec mount{"Mount", mount_fields};

// HostConfig with its embedded Resources (promoted fields).
#define DOCKGATE_HOST_CONFIG_FIELDS                                                                \
  {"Binds", k::string_list, nullptr, ptr}, {"ContainerIDFile", k::string},                         \
      {"LogConfig", k::object, &log_config}, {"NetworkMode", k::string},                           \
      {"PortBindings", k::object_list_map, &port_binding, ptr},                                    \
      {"RestartPolicy", k::object, &restart_policy}, {"AutoRemove", k::boolean},                   \
      {"VolumeDriver", k::string}, {"VolumesFrom", k::string_list, nullptr, ptr},                  \
      {"Mounts", k::object_list, &mount, ptr}, {"ConsoleSize", k::uint_pair},                      \
      {"Annotations", k::string_map, nullptr, ptr}, {"CapAdd", k::strslice, nullptr, ptr},         \
      {"CapDrop", k::strslice, nullptr, ptr}, {"CgroupnsMode", k::string},                         \
      {"Dns", k::string_list, nullptr, ptr}, {"DnsOptions", k::string_list, nullptr, ptr},         \
      {"DnsSearch", k::string_list, nullptr, ptr}, {"ExtraHosts", k::string_list, nullptr, ptr},   \
      {"GroupAdd", k::string_list, nullptr, ptr}, {"IpcMode", k::string}, {"Cgroup", k::string},   \
      {"Links", k::string_list, nullptr, ptr}, {"OomScoreAdj", k::int64}, {"PidMode", k::string},  \
      {"Privileged", k::boolean}, {"PublishAllPorts", k::boolean}, {"ReadonlyRootfs", k::boolean}, \
      {"SecurityOpt", k::string_list, nullptr, ptr}, {"StorageOpt", k::string_map, nullptr, ptr},  \
      {"Tmpfs", k::string_map, nullptr, ptr}, {"UTSMode", k::string}, {"UsernsMode", k::string},   \
      {"ShmSize", k::int64}, {"Sysctls", k::string_map, nullptr, ptr}, {"Runtime", k::string},     \
      {"Isolation", k::string}, {"MaskedPaths", k::string_list, nullptr, ptr},                     \
      {"ReadonlyPaths", k::string_list, nullptr, ptr}, {"Init", k::boolean, nullptr, ptr},         \
      DOCKGATE_RESOURCES_FIELDS

#define DOCKGATE_RESOURCES_FIELDS                                                                 \
  {"CpuShares", k::int64}, {"Memory", k::int64}, {"NanoCpus", k::int64},                          \
      {"CgroupParent", k::string}, {"BlkioWeight", k::uint64, nullptr, false, 65535},             \
      {"BlkioWeightDevice", k::object_list, &weight_device, ptr},                                 \
      {"BlkioDeviceReadBps", k::object_list, &throttle_device, ptr},                              \
      {"BlkioDeviceWriteBps", k::object_list, &throttle_device, ptr},                             \
      {"BlkioDeviceReadIOps", k::object_list, &throttle_device, ptr},                             \
      {"BlkioDeviceWriteIOps", k::object_list, &throttle_device, ptr}, {"CpuPeriod", k::int64},   \
      {"CpuQuota", k::int64}, {"CpuRealtimePeriod", k::int64}, {"CpuRealtimeRuntime", k::int64},  \
      {"CpusetCpus", k::string}, {"CpusetMems", k::string},                                       \
      {"Devices", k::object_list, &device_mapping, ptr},                                          \
      {"DeviceCgroupRules", k::string_list, nullptr, ptr},                                        \
      {"DeviceRequests", k::object_list, &device_request, ptr}, {"KernelMemory", k::int64},       \
      {"KernelMemoryTCP", k::int64}, {"MemoryReservation", k::int64}, {"MemorySwap", k::int64},   \
      {"MemorySwappiness", k::int64, nullptr, ptr}, {"OomKillDisable", k::boolean, nullptr, ptr}, \
      {"PidsLimit", k::int64, nullptr, ptr}, {"Ulimits", k::object_list, &ulimit, ptr},           \
      {"CpuCount", k::int64}, {"CpuPercent", k::int64}, {"IOMaximumIOps", k::uint64}, {           \
    "IOMaximumBandwidth", k::uint64                                                               \
  }

constexpr field_spec host_config_fields[] = {DOCKGATE_HOST_CONFIG_FIELDS};

constexpr field_spec endpoint_ipam_fields[] = {{"IPv4Address", k::string},
                                               {"IPv6Address", k::string},
                                               {"LinkLocalIPs", k::string_list, nullptr, ptr}};
constexpr object_spec endpoint_ipam{"EndpointIPAMConfig", endpoint_ipam_fields};

constexpr field_spec endpoint_settings_fields[] = {
    {"IPAMConfig", k::object, &endpoint_ipam, ptr},
    {"Links", k::string_list, nullptr, ptr},
    {"MacAddress", k::string},
    {"Aliases", k::string_list, nullptr, ptr},
    {"DriverOpts", k::string_map, nullptr, ptr},
    {"GwPriority", k::int64},
    {"NetworkID", k::string},
    {"EndpointID", k::string},
    {"Gateway", k::string},
    {"IPAddress", k::string},
    {"IPPrefixLen", k::int64},
    {"IPv6Gateway", k::string},
    {"GlobalIPv6Address", k::string},
    {"GlobalIPv6PrefixLen", k::int64},
    {"DNSNames", k::string_list, nullptr, ptr},
};
constexpr object_spec endpoint_settings{"EndpointSettings", endpoint_settings_fields};

constexpr field_spec networking_config_fields[] = {
    {"EndpointsConfig", k::object_map, &endpoint_settings, ptr}};
constexpr object_spec networking_config{"NetworkingConfig", networking_config_fields};

#define DOCKGATE_CONFIG_FIELDS                                                                     \
  {"Hostname", k::string}, {"Domainname", k::string}, {"User", k::string},                         \
      {"AttachStdin", k::boolean}, {"AttachStdout", k::boolean}, {"AttachStderr", k::boolean},     \
      {"ExposedPorts", k::empty_object_map, nullptr, ptr}, {"Tty", k::boolean},                    \
      {"OpenStdin", k::boolean}, {"StdinOnce", k::boolean}, {"Env", k::string_list, nullptr, ptr}, \
      {"Cmd", k::strslice, nullptr, ptr}, {"Healthcheck", k::object, &health_config, ptr},         \
      {"ArgsEscaped", k::boolean}, {"Image", k::string},                                           \
      {"Volumes", k::empty_object_map, nullptr, ptr}, {"WorkingDir", k::string},                   \
      {"Entrypoint", k::strslice, nullptr, ptr}, {"NetworkDisabled", k::boolean},                  \
      {"MacAddress", k::string}, {"OnBuild", k::string_list, nullptr, ptr},                        \
      {"Labels", k::string_map, nullptr, ptr}, {"StopSignal", k::string},                          \
      {"StopTimeout", k::int64, nullptr, ptr}, {                                                   \
    "Shell", k::strslice, nullptr, ptr                                                             \
  }

// The create body: Config's fields at the top, the inner "HostConfig", the deprecated
// top-level "Cpuset", "NetworkingConfig", and — deprecated but still read by dockerd — every
// HostConfig field at the top level too.
constexpr field_spec container_create_fields[] = {
    DOCKGATE_CONFIG_FIELDS,
    {"HostConfig", k::object, &host_config, ptr},
    {"NetworkingConfig", k::object, &networking_config, ptr},
    {"Cpuset", k::string},
    DOCKGATE_HOST_CONFIG_FIELDS,
};

constexpr field_spec exec_config_fields[] = {
    {"User", k::string},          {"Privileged", k::boolean},
    {"Tty", k::boolean},          {"ConsoleSize", k::uint_pair, nullptr, ptr},
    {"AttachStdin", k::boolean},  {"AttachStderr", k::boolean},
    {"AttachStdout", k::boolean}, {"Detach", k::boolean},
    {"DetachKeys", k::string},    {"Env", k::string_list, nullptr, ptr},
    {"WorkingDir", k::string},    {"Cmd", k::strslice, nullptr, ptr},
};

constexpr field_spec container_update_fields[] = {DOCKGATE_RESOURCES_FIELDS,
                                                  {"RestartPolicy", k::object, &restart_policy}};

// network.CreateRequest (API 1.41-1.52): what `POST /networks/create` decodes.
constexpr field_spec ipam_config_fields[] = {{"Subnet", k::string},
                                             {"IPRange", k::string},
                                             {"Gateway", k::string},
                                             {"AuxiliaryAddresses", k::string_map, nullptr, ptr}};
constexpr object_spec ipam_config{"IPAMConfig", ipam_config_fields};
constexpr field_spec ipam_fields[] = {{"Driver", k::string},
                                      {"Options", k::string_map, nullptr, ptr},
                                      {"Config", k::object_list, &ipam_config, ptr}};
constexpr object_spec ipam{"IPAM", ipam_fields};
constexpr field_spec config_reference_fields[] = {{"Network", k::string}};
constexpr object_spec config_reference{"ConfigReference", config_reference_fields};
constexpr field_spec network_create_fields[] = {
    {"Name", k::string},
    {"CheckDuplicate", k::boolean},
    {"Driver", k::string},
    {"Scope", k::string},
    {"EnableIPv4", k::boolean, nullptr, ptr},
    {"EnableIPv6", k::boolean, nullptr, ptr},
    {"IPAM", k::object, &ipam, ptr},
    {"Internal", k::boolean},
    {"Attachable", k::boolean},
    {"Ingress", k::boolean},
    {"ConfigOnly", k::boolean},
    {"ConfigFrom", k::object, &config_reference, ptr},
    {"Options", k::string_map, nullptr, ptr},
    {"Labels", k::string_map, nullptr, ptr},
};

// network.ConnectOptions and DisconnectOptions.
constexpr field_spec network_connect_fields[] = {
    {"Container", k::string}, {"EndpointConfig", k::object, &endpoint_settings, ptr}};
constexpr field_spec network_disconnect_fields[] = {{"Container", k::string},
                                                    {"Force", k::boolean}};

// volume.CreateOptions. ClusterVolumeSpec (swarm) is decoded as an object whose members
// are not modelled: its presence is what the review refuses.
constexpr object_spec opaque{"ClusterVolumeSpec", {}};
constexpr field_spec volume_create_fields[] = {{"Name", k::string},
                                               {"Driver", k::string},
                                               {"DriverOpts", k::string_map, nullptr, ptr},
                                               {"Labels", k::string_map, nullptr, ptr},
                                               {"ClusterVolumeSpec", k::object, &opaque, ptr}};

}  // namespace

const object_spec host_config{"HostConfig", host_config_fields};
const object_spec container_create{"ContainerCreate", container_create_fields};
const object_spec exec_config{"ExecConfig", exec_config_fields};
const object_spec container_update{"ContainerUpdate", container_update_fields};
const object_spec network_create{"NetworkCreate", network_create_fields};
const object_spec network_connect{"NetworkConnect", network_connect_fields};
const object_spec network_disconnect{"NetworkDisconnect", network_disconnect_fields};
const object_spec volume_create{"VolumeCreate", volume_create_fields};
const object_spec endpoint_settings_spec{"EndpointSettings", endpoint_settings_fields};

}  // namespace dockgate::policy::schema
