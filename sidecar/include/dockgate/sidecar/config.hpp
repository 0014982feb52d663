#pragma once
// The sidecar's configuration: every SANDBOX_* variable of the Aivory sidecar, with the
// same name, default and clamp. Paths come only from here, never from a request.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dockgate::sidecar {

struct config {
  std::string listen = "0.0.0.0:8000";  // SANDBOX_LISTEN
  // The HTTP server: connections at once (SANDBOX_MAX_CONNECTIONS), per peer address
  // (SANDBOX_MAX_CONNECTIONS_PER_PEER), and the deadline of a whole request head
  // (SANDBOX_HEAD_TIMEOUT_S; also the idle time allowed between kept-alive requests).
  std::int64_t max_connections = 256;
  std::int64_t max_connections_per_peer = 64;
  std::int64_t head_timeout_s = 10;
  bool keep_sessions_on_stop = false;  // SANDBOX_KEEP_SESSIONS_ON_STOP: leave them for adoption
  // SANDBOX_STORAGE_ENDPOINTS: the S3-compatible endpoints a request's storage block may
  // name ("https://minio.internal:9000", "*.example.com"), comma-separated, besides the
  // public ones of the providers (s3.<region>.amazonaws.com, s3.oss-<region>.aliyuncs.com).
  // Anything else is refused: the sidecar never connects where a client points it.
  std::vector<std::string> storage_endpoints;
  // SANDBOX_INSTANCE: this sidecar's name on the engine. Sessions carry it in a label; a
  // sidecar counts, adopts and reaps only its own, so several can share one engine.
  std::string instance = "default";
  // SANDBOX_INSTANCE_LEASE_S: the instance's lease on the engine (instance_lease.hpp)
  // expires this long after its holder's last renewal (every third of it). At least 5.
  std::int64_t instance_lease_s = 15;
  std::string image = "aivory-sandbox:latest";
  // SANDBOX_IMAGES: more images a request may ask for (OpenSandbox's image.uri), as written,
  // comma-separated; each must be on the engine already (none is pulled). SANDBOX_IMAGE is
  // always one of them.
  std::vector<std::string> images;
  // SANDBOX_RUNTIMES: the OCI runtimes a session may ask for by name (Aivory's `runtime`,
  // OpenSandbox's extensions.secureRuntime), comma-separated, as the engine registers them
  // (e.g. "runc,runsc"); the first is the default, written in every create that asks for
  // none and the only one the warm pool holds. Empty (the default): no `Runtime` in any
  // create (the engine's, or the gate's forced, default) and every runtime asked is refused.
  // A gVisor runtime ("runsc", "runsc-…") is one whose sandbox has no network of its own
  // (registered with --network=none, scripts/engine.sh): SANDBOX_NETWORK=allowlist sessions
  // cannot run on it (docs/sidecar.md, "gVisor").
  std::vector<std::string> runtimes;
  // SANDBOX_MAX_SANDBOX_TIMEOUT_SECONDS: the longest OpenSandbox `timeout` (its sandbox's
  // life) a create may ask for; longer is refused (400).
  std::int64_t max_sandbox_timeout_seconds = 86400;
  // SANDBOX_HOST_VOLUME_ROOT: an OpenSandbox host volume's path must be <root>/<key>; it
  // becomes the FUSE workspace of archive key <key> (SANDBOX_WORKSPACE_MODE=fuse only).
  std::string host_volume_root = "/mnt/aimem";
  std::string memory = "2g";
  std::int64_t memory_bytes = 2LL << 30;
  std::string cpus = "1";
  std::int64_t nano_cpus = 1000000000;
  std::int64_t pids_limit = 256;
  std::int64_t nofile_soft = 1024, nofile_hard = 1024;
  std::string api_key;
  bool allow_no_auth = false;
  std::int64_t exec_timeout_cap_ms = 600000;
  std::int64_t default_exec_timeout_ms = 120000;
  std::int64_t archive_timeout_s = 120;
  std::int64_t docker_call_timeout_s = 30;
  std::int64_t idle_ttl_seconds = 1800;
  std::int64_t idle_ttl_cap_seconds = 86400;
  std::int64_t idle_reaper_sweep_interval = 300;
  // SANDBOX_DORMANT_AFTER_SECONDS: a paused session unused this long goes dormant (its
  // workspace archived, its container removed, the session kept: sessions/
  // session_dormancy.cpp); 0: never. SANDBOX_DORMANT_IDLE: a running one unused this long
  // too. Its record and, for a session without storage, its archive are kept under
  // SANDBOX_LOCAL_STORAGE_DIR/dockgate-dormant/: without that directory no session goes
  // dormant (the sidecar says so at start).
  std::int64_t dormant_after_seconds = 0;
  bool dormant_idle = false;
  std::int64_t max_sessions = 16;
  // SANDBOX_WARM_POOL: session containers created and started ahead (0: none). They count
  // against SANDBOX_MAX_SESSIONS. Only in the tmpfs workspace mode (a FUSE workspace is
  // mounted and bound per session, before its container exists).
  std::int64_t warm_pool = 2;
  std::int64_t max_concurrent_execs = 4;
  std::int64_t max_concurrent_creates = 2;
  std::int64_t queue_timeout_seconds = 150;
  bool pull_on_start = false;
  bool read_only_rootfs = true;
  std::string tmpfs_size = "256m";
  std::string workspace_size = "512m";
  // SANDBOX_WORKSPACE_MODE: "tmpfs" (the seed's: /workspace in memory, archived when the
  // session ends) or "fuse" (each session's own FUSE mount of object storage, made by
  // dockgate-mount on the host and bound by the gate at /workspace; nothing to archive).
  std::string workspace_mode = "tmpfs";
  // SANDBOX_MOUNT_COMMAND: dockgate-mount (it reads the AIMEM_* variables this process
  // passes on; its AIMEM_MOUNT_ROOT is the gate profile's workspace root).
  std::string mount_command = "dockgate-mount";
  // The FUSE workspaces' store (the AIMEM_* variables dockgate-mount reads, read here too):
  // in fuse mode each session's record and this instance's store lease live in it, under
  // <prefix>/.dockgate-fleet/ (fleet_store.hpp), so that any sidecar sharing the store can
  // take a session over when its host is gone.
  struct workspace_store {
    std::string bucket, endpoint, access_key, secret_key, region = "us-east-1", prefix;
    bool operator==(const workspace_store&) const = default;
  } store;
  // SANDBOX_FLEET_URL: where the other sidecars of the fleet reach this one
  // (http://host:port); a call for a session this sidecar holds that reaches another
  // member is forwarded here. Empty: such a call answers 503 naming the holder.
  // With it set, a stop hands the sessions over (containers removed, records kept)
  // instead of ending them.
  std::string fleet_url;
  // SANDBOX_FLEET_MEMBERS: the fleet's members, instance=http://host:port,... A call for a
  // session another instance holds is forwarded only to that instance's address here; a
  // holder not listed is not dialled (the store names who holds a session, never where
  // to dial). Empty: nothing is forwarded (such a call answers 503 naming the holder).
  std::map<std::string, std::string> fleet_members;
  // SANDBOX_FLEET_KEY_FILE: a file holding the fleet's shared secret (at least 32 bytes,
  // the same on every member; a trailing newline is not part of it). Forwarded calls are
  // signed with it (fleet_auth.hpp) and accepted only when signed with it. Needed with
  // SANDBOX_FLEET_URL or SANDBOX_FLEET_MEMBERS.
  std::string fleet_key_file;
  std::string fleet_key;
  std::string disk_size;
  std::string seccomp_profile;
  std::int64_t max_output_bytes = 32768;
  // SANDBOX_CELL_RUNNER: cells run through the in-container runner (one exec stream per
  // session) instead of Docker execs each; 0 keeps the plain execs.
  bool cell_runner = true;
  std::int64_t max_artifact_bytes = 20971520;
  std::int64_t max_files_per_exec = 20;
  std::int64_t max_total_artifact_bytes = 52428800;
  std::int64_t max_collect_seconds = 60;
  std::int64_t collect_file_timeout_s = 30;
  std::int64_t max_upload_bytes = 41943040;
  std::int64_t max_body_bytes = 58720256;
  std::int64_t max_storage_body_bytes = 314572800;
  std::int64_t max_code_bytes = 1048576;
  std::int64_t max_archive_bytes = 209715200;
  std::int64_t storage_default_ttl = 3600;
  std::int64_t storage_max_ttl = 86400;
  std::string local_storage_dir;
  std::int64_t s3_max_attempts = 3;
  std::int64_t s3_connect_timeout_s = 10;
  std::int64_t s3_read_timeout_s = 120;
  std::int64_t oss_connect_timeout_s = 30;
  // SANDBOX_NETWORK: "none" (the seed's: sessions have no network) or "allowlist": each
  // session joins `egress_network`, an internal bridge network (no route off it) that the
  // sidecar creates through the gate, whose only open address is the egress proxy on its
  // gateway, port `egress_proxy_port` (SANDBOX_EGRESS_PROXY_PORT). The proxy (squid,
  // scripts/egress-proxy.sh) lets through only SANDBOX_EGRESS_ALLOW's names: host names
  // (".example.org": the name and every name under it), never an address.
  // HTTP(S)_PROXY, their lower-case forms, NO_PROXY and PIP_PROXY name it in the session.
  std::string network = "none";
  std::vector<std::string> egress_allow;
  std::string egress_network = "dockgate-egress";  // SANDBOX_EGRESS_NETWORK
  std::int64_t egress_proxy_port = 3128;
  // SANDBOX_EGRESS_POLICY_DIR (required with allowlist): where each session's own list is
  // written for the proxy, one file per session network named by its gateway's address
  // (egress/egress_policy.hpp); the proxy's EGRESS_POLICY_DIR, the same directory.
  std::string egress_policy_dir;

  bool operator==(const config&) const = default;
};

struct config_result {
  std::optional<config> value;
  std::vector<std::string> errors;
};

// Reads the configuration from an environment (name -> value; the program passes its own,
// tests a map of their own). Every variable is read through one table (config.cpp
// `variables`: name, kind, default, bounds, field), then the rules that join variables
// are checked; every error is reported, none stops the others being found (the seed would
// crash at import on the first). A value only when there is no error.
config_result load_config(const std::map<std::string, std::string>& env);

// One variable of load_config's table as docs/sidecar.md's table shows it: its name, its
// default ("(none)" for an empty one, read from a default `config`) and what it accepts
// ("integer ≥ 1", "size", "tmpfs or fuse", ...).
struct config_variable {
  std::string name;
  std::string shown_default;
  std::string accepts;
};
std::vector<config_variable> config_variables();

// Whether `name` may be an entry of SANDBOX_EGRESS_ALLOW: a DNS host name (labels of
// a-z, 0-9, '-', at least one letter in the last), optionally led by '.' (the name and
// its subdomains). Never an IP literal: the allowlist names hosts, and an address would
// let a cell reach whatever answers there under no name at all.
bool valid_egress_name(std::string_view name);

// Whether the engine's runtime `name` is gVisor's runsc (Docker's customary names: "runsc",
// "runsc-kvm", "runsc-debug", …): a guest kernel of its own, whose processes the host's
// `ps` does not show (the kill sweep's judge, session_containers.cpp) and whose sandbox has
// no network of its own here (registered with --network=none).
inline bool gvisor_runtime(std::string_view name) {
  return name == "runsc" || name.starts_with("runsc-");
}

// The runtime every session create that asks for none is written with: SANDBOX_RUNTIMES'
// first; "" with none listed (no `Runtime` in the create body: the engine's default).
inline std::string default_runtime(const config& c) {
  return c.runtimes.empty() ? std::string() : c.runtimes.front();
}

// Docker's size syntax: 512m, 2g, 1024 (bytes), 1.5g.
std::optional<std::int64_t> parse_size(std::string_view text);

}  // namespace dockgate::sidecar
