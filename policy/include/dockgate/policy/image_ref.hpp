#pragma once
// Image references as the daemon reads them (distribution/reference's
// ParseNormalizedNamed): `busybox` is docker.io/library/busybox:latest.

#include <optional>
#include <string>
#include <string_view>

namespace dockgate::policy {

struct image_reference {
  std::string domain;  // docker.io, 127.0.0.1:5000, ...
  std::string path;    // library/busybox
  std::string tag;     // empty if none
  std::string digest;  // sha256:<64 hex>, empty if none

  // domain/path[:tag][@digest]
  std::string normalized() const;
  bool operator==(const image_reference&) const = default;
};

// Parses and normalises a reference; a reference without tag or digest gets `latest`
// when `default_tag` is set. Refuses upper case, bad tags, bad digests, empty parts.
std::optional<image_reference> parse_image_reference(std::string_view text, bool default_tag,
                                                     std::string* error = nullptr);

// `*` in a pattern matches any run of characters (including `/` and `:`).
bool glob_match(std::string_view pattern, std::string_view text);

}  // namespace dockgate::policy
