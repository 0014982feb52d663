#pragma once
// The process environment as a map (the first of a repeated name wins, as getenv does):
// what the programs read their configuration from, in one place.

#include <map>
#include <string>

namespace dockgate::common {

std::map<std::string, std::string> process_environment();

}  // namespace dockgate::common
