#pragma once
// HMAC-SHA256 of `text` under `key`, as lowercase hex (all of it, or its first `bytes`
// bytes). Internal to the sidecar library.

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <string>
#include <string_view>

namespace dockgate::sidecar {

inline std::string hmac_sha256_hex(std::string_view key, std::string_view text,
                                   std::size_t bytes = 32) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(text.data()), text.size(), mac, &len);
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  for (unsigned i = 0; i < len && i < bytes; ++i) {
    out += digits[mac[i] >> 4];
    out += digits[mac[i] & 15];
  }
  return out;
}

}  // namespace dockgate::sidecar
