#pragma once
// `dockgate-proxy explain`: what a profile decides for one request, without a daemon.

#include <optional>
#include <string>

#include "dockgate/policy/policy_file.hpp"

namespace dockgate::proxy {

struct explanation {
  std::string text;
  int exit_status = 0;  // 0 allowed (perhaps rewritten), 1 refused
};

explanation explain_request(const policy::profile& profile, std::string_view method,
                            std::string_view target, const std::optional<std::string>& body);

}  // namespace dockgate::proxy
