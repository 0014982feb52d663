#pragma once
// The names the sidecar gives its containers on the engine (their labels), and the users it
// runs them as.
// Internal to the sidecar library.

#include <string_view>

namespace dockgate::sidecar {

// Labels of session containers (the gate adds its own owner label). What a restarted
// sidecar needs to archive an adopted session where it belongs is kept here, never a
// secret: the storage's place (not its credentials), the TTL, the restore's outcome.
inline constexpr std::string_view session_label = "sandbox.session_id";
inline constexpr std::string_view created_label = "sandbox.created_at";
inline constexpr std::string_view archive_label = "sandbox.archive_key";
inline constexpr std::string_view instance_label = "sandbox.instance";
inline constexpr std::string_view storage_label = "sandbox.storage";
inline constexpr std::string_view ttl_label = "sandbox.idle_ttl";
inline constexpr std::string_view restore_label = "sandbox.restore";
inline constexpr std::string_view generation_label = "sandbox.archive_generation";
// A kernel session's kernel name (kernel.hpp): a restarted sidecar adopts it as one.
inline constexpr std::string_view kernel_label = "sandbox.kernel";
// What a client said of the session beside its code (session.hpp): the image it asked for
// (absent: SANDBOX_IMAGE), when it expires (seconds since the epoch), "0" when its idle
// time never ends it, and each of its metadata labels under the prefix.
inline constexpr std::string_view image_label = "sandbox.image";
inline constexpr std::string_view expires_label = "sandbox.expires_at";
inline constexpr std::string_view idle_reaped_label = "sandbox.idle_reaped";
inline constexpr std::string_view metadata_label_prefix = "sandbox.metadata.";
// Its own egress list (egress_policy_text), when it has one.
inline constexpr std::string_view egress_policy_label = "sandbox.egress_policy";
// The OCI runtime it asked for (session.hpp runtime), when not the default: a restarted
// sidecar adopts it knowing its runtime (the kill sweep's judge differs under gVisor).
inline constexpr std::string_view runtime_label = "sandbox.runtime";
inline constexpr std::string_view container_prefix = "dockgate-sbx-";
// Who runs what in a session container. Cells, the cell runner and every command of the
// sidecar run as the session user (every exec names it; the gate's sandbox profile forces
// it). The container's own processes, its init and the `sleep` that keeps it alive, the
// only ones that outlive every cell, run as a uid of their own that no exec can take: the
// kernel lets no process of the session user trace them, open their memory or
// descriptors, or signal them, from their first instruction on (docs/security.md, "What a
// cell can do to its own container").
inline constexpr std::string_view session_user = "1000:1000";
inline constexpr std::string_view keepalive_user = "65534:65534";
// The warm pool (SANDBOX_WARM_POOL). A pool container is made before its request, so its
// labels carry no request's data: the session ID it will serve, the instance and
// `sandbox.pool`. Labels cannot change after create, so a claim is recorded in a claim
// record: a container that is created and never started, named `<pool container>-claim`,
// with the session's labels and `sandbox.claim` (the pool container's ID). A restarted
// sidecar adopts a pool container with a record and removes one without.
inline constexpr std::string_view pool_label = "sandbox.pool";
inline constexpr std::string_view claim_label = "sandbox.claim";
inline constexpr std::string_view claim_suffix = "-claim";

}  // namespace dockgate::sidecar
