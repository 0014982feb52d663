// libFuzzer target: the one key resolver. Oracle: a key resolves to a field exactly when
// Go's folding of both would be equal (ASCII case, Kelvin sign, long s), checked by an
// independent spelling of the rule, and resolution is a function of the key.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "dockgate/policy/go_json.hpp"

using namespace dockgate::policy;

namespace {
// Independent reference: fold each code point of the key to the ASCII letter Go's fold
// set would give it, or fail.
bool reference_equal(std::string_view key, std::string_view field) {
  std::string folded;
  for (std::size_t i = 0; i < key.size();) {
    const unsigned char c = static_cast<unsigned char>(key[i]);
    if (c < 0x80) {
      folded += static_cast<char>((c >= 'A' && c <= 'Z') ? c + 32 : c);
      ++i;
    } else if (key.substr(i, 3) == "\u212A") {
      folded += 'k';
      i += 3;
    } else if (key.substr(i, 2) == "\u017F") {
      folded += 's';
      i += 2;
    } else {
      return false;
    }
  }
  std::string f(field);
  for (auto& ch : f) ch = static_cast<char>((ch >= 'A' && ch <= 'Z') ? ch + 32 : ch);
  return folded == f;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view key(reinterpret_cast<const char*>(data), size);
  for (const object_spec* spec :
       {&schema::container_create, &schema::host_config, &schema::exec_config}) {
    const auto index = resolve_key(key, *spec);
    std::optional<std::size_t> expected;
    for (std::size_t i = 0; i < spec->fields.size() && !expected; ++i)
      if (reference_equal(key, spec->fields[i].name)) expected = i;
    if (index != expected) std::abort();
  }
  return 0;
}
