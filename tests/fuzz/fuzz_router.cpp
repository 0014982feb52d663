// libFuzzer target: the router. The first byte picks the method, the rest is the target.
// Checks the canonicality invariant on every routed target: nothing dockerd would decode
// or clean differently can be routed.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "dockgate/policy/route.hpp"

using namespace dockgate::policy;
namespace http = dockgate::http;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  static constexpr http::method methods[] = {http::method::get, http::method::head,
                                             http::method::post, http::method::put,
                                             http::method::delete_};
  const http::method method = methods[data[0] % 5];
  const std::string_view target(reinterpret_cast<const char*>(data + 1), size - 1);
  auto result = route_request(method, target);
  const auto* r = std::get_if<route>(&result);
  if (!r) return 0;
  const std::string_view path = target.substr(0, target.find('?'));
  if (path.empty() || path.front() != '/') std::abort();
  if (path.find('%') != std::string_view::npos) std::abort();
  if (path.find("//") != std::string_view::npos) std::abort();
  if (path.find("/./") != std::string_view::npos || path.find("/../") != std::string_view::npos)
    std::abort();
  if (path.ends_with("/.") || path.ends_with("/..") || (path.size() > 1 && path.ends_with("/")))
    std::abort();
  if (target.find('#') != std::string_view::npos) std::abort();
  if (r->version && (*r->version < min_api_version || *r->version > max_api_version)) std::abort();
  if (!r->param.empty() && r->param.find('/') != std::string_view::npos) {
    // Only image and plugin references may hold `/`.
    const auto name = operation_name(r->op);
    if (!(name.starts_with("Image") || name.starts_with("Plugin") ||
          name.starts_with("Distribution")))
      std::abort();
  }
  // The route is a function of the target: routing it again gives the same answer.
  if (!(route_request(method, target) == result)) std::abort();
  return 0;
}
