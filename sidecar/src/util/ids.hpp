#pragma once
// The ids the sidecar makes and accepts: session ids (32 lowercase hex digits, as the Aivory
// sidecar makes them), archive keys, and random hex for names and tokens. Internal to the
// sidecar library.

#include <algorithm>
#include <cctype>
#include <random>
#include <string>
#include <string_view>

namespace dockgate::sidecar {

// `n` bytes as lowercase hex.
inline std::string hex_of(const unsigned char* p, std::size_t n) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(n * 2);
  for (std::size_t i = 0; i < n; ++i) {
    out += digits[p[i] >> 4];
    out += digits[p[i] & 15];
  }
  return out;
}

inline std::string random_hex(std::size_t bytes) {
  static thread_local std::random_device rd;
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  for (std::size_t i = 0; i < bytes; ++i) {
    const auto b = static_cast<unsigned char>(rd());
    out += digits[b >> 4];
    out += digits[b & 15];
  }
  return out;
}

inline bool valid_session_id(std::string_view id) {
  return id.size() == 32 && std::all_of(id.begin(), id.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

inline bool valid_archive_key(std::string_view k) {
  return !k.empty() && k.size() <= 128 && std::all_of(k.begin(), k.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
  });
}

inline std::size_t utf8_chars(std::string_view s) {
  return static_cast<std::size_t>(std::count_if(
      s.begin(), s.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

}  // namespace dockgate::sidecar
