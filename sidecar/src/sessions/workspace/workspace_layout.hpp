#pragma once
// The workspace a session starts each run with. Internal to the sidecar library.

#include <string_view>

namespace dockgate::sidecar {

// Inputs (uploads, skills) are staged afresh for every run: emptied on create and on
// /files/reset-inputs, never archived.
inline constexpr std::string_view reset_inputs_script =
    "rm -rf -- /workspace/uploads /workspace/skills && mkdir -p -- /workspace/uploads "
    "/workspace/skills";

}  // namespace dockgate::sidecar
