// The `/info` answer with only a profile's kept members. See system_info.hpp.
#include "dockgate/policy/system_info.hpp"

#include <simdjson.h>

#include <algorithm>

#include "dockgate/common/error_body.hpp"

namespace dockgate::policy {

std::string filter_system_info(std::string_view json, const std::vector<std::string>& keep) {
  simdjson::dom::parser parser;
  simdjson::dom::object obj;
  if (parser.parse(json.data(), json.size()).get_object().get(obj) != simdjson::SUCCESS)
    return "{}\n";
  std::string out = "{";
  for (auto [k, v] : obj) {
    if (std::find(keep.begin(), keep.end(), k) == keep.end()) continue;
    if (out.size() > 1) out += ',';
    out += '"';
    common::append_json_escaped(out, k);
    out += "\":";
    out += simdjson::minify(v);
  }
  out += "}\n";
  return out;
}

}  // namespace dockgate::policy
