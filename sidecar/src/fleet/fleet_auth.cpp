// The fleet's own credential on a forwarded call (fleet_auth.hpp).
#include "fleet/fleet_auth.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <cstdlib>
#include <sstream>
#include <vector>

#include "storage/s3.hpp"  // sha256_hex
#include "util/ids.hpp"

namespace dockgate::sidecar {

namespace {

std::string mac(std::string_view key, std::string_view from, std::string_view to,
                std::int64_t unix_time, std::string_view nonce, std::string_view method,
                std::string_view path, std::string_view body) {
  std::string text = "dockgate-fleet-v1\n";
  for (std::string_view part : {from, to}) (text += part) += '\n';
  text += std::to_string(unix_time) + '\n';
  for (std::string_view part : {nonce, method, path}) (text += part) += '\n';
  text += sha256_hex(body);
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(text.data()), text.size(), out, &len);
  return hex_of(out, len);
}

bool is_hex(std::string_view s) {
  return s.find_first_not_of("0123456789abcdef") == std::string_view::npos;
}

}  // namespace

std::string fleet_signature(std::string_view key, std::string_view from, std::string_view to,
                            std::int64_t unix_time, std::string_view nonce, std::string_view method,
                            std::string_view path, std::string_view body) {
  return "v1 " + std::string(from) + " " + std::string(to) + " " + std::to_string(unix_time) + " " +
         std::string(nonce) + " " + mac(key, from, to, unix_time, nonce, method, path, body);
}

std::optional<std::string> fleet_verifier::check(std::string_view header,
                                                 std::string_view forwarded_by,
                                                 std::string_view method, std::string_view path,
                                                 std::string_view body, std::int64_t now) {
  if (key_.empty()) return "this sidecar accepts no forwarded call (no SANDBOX_FLEET_KEY_FILE)";
  if (header.empty()) return "a forwarded call needs the fleet's credential (X-Dockgate-Fleet)";
  std::istringstream in{std::string(header)};
  std::vector<std::string> f;
  for (std::string w; in >> w;) f.push_back(w);
  if (f.size() != 6 || f[0] != "v1" || f[3].empty() ||
      f[3].find_first_not_of("0123456789") != std::string::npos || f[3].size() > 12 ||
      f[4].size() != 32 || !is_hex(f[4]) || f[5].size() != 64 || !is_hex(f[5]))
    return "the fleet credential is malformed";
  if (f[2] != self_) return "the fleet credential is addressed to another instance";
  if (forwarded_by != f[1]) return "the fleet credential names another sender";
  const std::int64_t when = std::strtoll(f[3].c_str(), nullptr, 10);
  if (when < now - fleet_clock_skew_s || when > now + fleet_clock_skew_s)
    return "the fleet credential is outside the clock window (members' clocks must agree within " +
           std::to_string(fleet_clock_skew_s) + " s)";
  const std::string expected = mac(key_, f[1], f[2], when, f[4], method, path, body);
  if (CRYPTO_memcmp(expected.data(), f[5].data(), expected.size()) != 0)
    return "the fleet credential does not match (another fleet key, or the call was changed)";
  // Accepted once: a signature seen on the wire cannot be sent again.
  std::lock_guard g(m_);
  if (now != swept_) {
    swept_ = now;
    for (auto it = nonces_.begin(); it != nonces_.end();)
      it = it->second < now ? nonces_.erase(it) : std::next(it);
  }
  if (nonces_.size() >= 1'000'000) return "too many forwarded calls at once; try again";
  if (!nonces_.emplace(f[4], when + fleet_clock_skew_s).second)
    return "the fleet credential was used before (a replayed call)";
  return std::nullopt;
}

}  // namespace dockgate::sidecar
