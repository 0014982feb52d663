#pragma once
// `dockgate-proxy learn`: reads the audit files, learns (policy::learn_profile), checks the
// result parses as a policy, and writes it.

#include "dockgate/proxy/options.hpp"

namespace dockgate::proxy {

// Exit status: 0 written; 1 the files could not be read or written, the --policy does not
// load, no line was learned (nothing is written), or the result is not a valid policy (a
// bug: it is printed, not written).
int run_learn(const learn_command& c);

}  // namespace dockgate::proxy
