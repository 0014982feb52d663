// Sealed fields of the fleet's records (sealed.hpp).
#include "fleet/sealed.hpp"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <array>
#include <memory>

#include "util/ids.hpp"

namespace dockgate::sidecar {

namespace {

constexpr std::string_view prefix = "v1:";
constexpr std::size_t nonce_size = 12, tag_size = 16;

std::array<unsigned char, 32> derived_key(std::string_view fleet_key) {
  constexpr std::string_view label = "dockgate-fleet-sealed-v1";
  std::array<unsigned char, 32> out{};
  unsigned int len = 0;
  HMAC(EVP_sha256(), fleet_key.data(), static_cast<int>(fleet_key.size()),
       reinterpret_cast<const unsigned char*>(label.data()), label.size(), out.data(), &len);
  return out;
}

std::optional<std::string> unhex(std::string_view text) {
  if (text.size() % 2) return std::nullopt;
  auto value = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  std::string out;
  for (std::size_t i = 0; i < text.size(); i += 2) {
    const int hi = value(text[i]), lo = value(text[i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out += static_cast<char>(hi * 16 + lo);
  }
  return out;
}

using cipher_ctx = std::unique_ptr<EVP_CIPHER_CTX, decltype(&EVP_CIPHER_CTX_free)>;

}  // namespace

std::string seal(std::string_view fleet_key, std::string_view bound_to, std::string_view plain) {
  const auto key = derived_key(fleet_key);
  std::string out(nonce_size + plain.size() + tag_size, '\0');
  auto* bytes = reinterpret_cast<unsigned char*>(out.data());
  if (RAND_bytes(bytes, nonce_size) != 1) return {};
  cipher_ctx ctx(EVP_CIPHER_CTX_new(), EVP_CIPHER_CTX_free);
  int len = 0;
  if (!ctx || EVP_EncryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, key.data(), bytes) != 1 ||
      EVP_EncryptUpdate(ctx.get(), nullptr, &len,
                        reinterpret_cast<const unsigned char*>(bound_to.data()),
                        static_cast<int>(bound_to.size())) != 1 ||
      EVP_EncryptUpdate(ctx.get(), bytes + nonce_size, &len,
                        reinterpret_cast<const unsigned char*>(plain.data()),
                        static_cast<int>(plain.size())) != 1 ||
      EVP_EncryptFinal_ex(ctx.get(), bytes + nonce_size + len, &len) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_GET_TAG, tag_size,
                          bytes + nonce_size + plain.size()) != 1)
    return {};
  return std::string(prefix) + hex_of(bytes, out.size());
}

std::optional<std::string> unseal(std::string_view fleet_key, std::string_view bound_to,
                                  std::string_view sealed) {
  if (!sealed.starts_with(prefix)) return std::nullopt;
  auto raw = unhex(sealed.substr(prefix.size()));
  if (!raw || raw->size() < nonce_size + tag_size) return std::nullopt;
  const auto key = derived_key(fleet_key);
  auto* bytes = reinterpret_cast<unsigned char*>(raw->data());
  const std::size_t n = raw->size() - nonce_size - tag_size;
  std::string plain(n, '\0');
  cipher_ctx ctx(EVP_CIPHER_CTX_new(), EVP_CIPHER_CTX_free);
  int len = 0;
  if (!ctx || EVP_DecryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, key.data(), bytes) != 1 ||
      EVP_DecryptUpdate(ctx.get(), nullptr, &len,
                        reinterpret_cast<const unsigned char*>(bound_to.data()),
                        static_cast<int>(bound_to.size())) != 1 ||
      EVP_DecryptUpdate(ctx.get(), reinterpret_cast<unsigned char*>(plain.data()), &len,
                        bytes + nonce_size, static_cast<int>(n)) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_TAG, tag_size, bytes + nonce_size + n) != 1)
    return std::nullopt;
  int last = 0;
  if (EVP_DecryptFinal_ex(ctx.get(), reinterpret_cast<unsigned char*>(plain.data()) + len, &last) !=
      1)
    return std::nullopt;
  return plain;
}

}  // namespace dockgate::sidecar
