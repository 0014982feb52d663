#pragma once
// Small helpers of the sidecar with a contract of their own (unit-tested in
// tests/sidecar/util_test.cpp): base64, workspace paths, shell quoting, UTF-8, MIME types,
// running a program. Internal to the sidecar library.

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dockgate::sidecar {

std::string base64_encode(std::string_view data);
std::optional<std::string> base64_decode_strict(std::string_view text);
// os.path.normpath-style confinement: the absolute, normalised path under /workspace, or
// nullopt.
std::optional<std::string> workspace_path(std::string_view path);
// The segments of a slash-separated path, without empty and "." segments (".." kept):
// the one path walker behind workspace confinement and archive member checks.
std::vector<std::string_view> path_segments(std::string_view path);
std::string shell_quote(std::string_view s);
std::string valid_utf8(std::string_view bytes);  // invalid sequences become U+FFFD
std::string mime_type_for(std::string_view name);

// A program run to its end (no shell), its output captured, killed at the deadline.
struct command_output {
  int exit_code = -1;  // -1: did not exit by itself (killed at the deadline, or not started)
  std::string out, err;
};
command_output run_command(const std::vector<std::string>& argv, std::chrono::milliseconds timeout);

}  // namespace dockgate::sidecar
