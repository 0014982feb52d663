#pragma once
// `dockgate-proxy learn`: the narrowest profile that allows exactly what a client did, from
// the gate's audit lines (docs/policy.md, "Learning a profile"). Pure: the caller reads
// the files and writes the result.
//
// Invariant: what the security invariants forbid is never learned. A request the gate
// refused, one audit mode says it would have refused, and one that set a widening field
// (widening_fields.hpp) off its safe value that no profile rule can bound (privileged,
// host namespaces, added capabilities, devices, ...) adds nothing to the profile; it is
// listed in "refused_seen" for a human to decide.
//
// Invariant: a line is evidence only of what the gate could have written, because an
// audit log can be edited. Nothing the line says about itself is trusted: the widening
// set is recomputed from its recorded values with the gate's own table (a line whose
// `widening` leaves out what its values widen is refused as edited), every line is checked
// against docs/audit.schema.json (audit_line.hpp), the profile it names must be one of the
// recording policy's and must allow its operation, and an allowed line's values must pass
// that profile's own review again. A value that shares a host namespace or weakens
// SecurityOpt is never written into an allow list, whatever the lines say.

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace dockgate::policy {

struct policy;

struct learn_options {
  std::string from_profile;          // read only lines of this profile; empty: every line
  std::string name = "learned";      // the learned profile's name
  std::vector<std::string> sources;  // the files read, named in the top-level comment
  // The policy the lines were recorded under (`learn --policy`): a line's profile must be
  // one of its profiles. Without one, no line is learned.
  const policy* recorded = nullptr;
};

struct learn_result {
  std::string policy;                     // a policy file (JSON), what `--policy` reads
  std::vector<std::string> refused_seen;  // "<operation>: <why> (seen N times, first <time> <id>)"
  std::size_t lines_read = 0;             // audit lines of the profile that were read
  std::size_t lines_learned = 0;          // those that added to the profile
  // Lines refused as no record the gate could have written: "<file>:<line>: <why>" (not
  // JSON, not by the schema, a profile the recording policy lacks or an operation it does
  // not allow, a widening list its own values contradict, values its profile refuses).
  std::vector<std::string> errors;
  // ContainerCreate and ContainerExec lines the gate let through with no "seen" (their
  // profile has no "record": "fields"): their operation is learned, no body rule.
  std::size_t unrecorded_bodies = 0;
  std::vector<std::string> unrecorded_profiles;  // profiles read that do not record fields
};

// Whether `value` of the create field `path` may stand in a learned allow list: false for
// a value that shares a host namespace (PidMode, IpcMode, UTSMode, UsernsMode, CgroupnsMode,
// Cgroup: anything but their private values; NetworkMode host or container:<id>) or for a
// SecurityOpt entry other than no-new-privileges (seccomp=unconfined, apparmor=unconfined,
// label=disable, systempaths=unconfined, no-new-privileges=false, ...). The widening
// table's safe values decide (widening_fields.hpp); fields outside it are not judged here.
bool learnable_create_value(std::string_view path, std::string_view value);

// `audit_texts`: whole audit logs, one JSON line per request.
learn_result learn_profile(std::span<const std::string_view> audit_texts, const learn_options& o);

}  // namespace dockgate::policy
