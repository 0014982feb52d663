#pragma once
// Percent-encoding (RFC 3986, section 2.1), written once for every program: the query
// values the gate writes for dockerd (the confined `filters` of lists and events) and the
// object keys and query values the sidecar signs for S3.
//
// Invariant: one function makes the text that is sent and the text that is signed. SigV4
// signs the canonical URI and query as encoded (AWS's UriEncode: every byte but
// A-Z a-z 0-9 - . _ ~ as %XX, upper-case hex, '/' kept in an object key's path), so an
// encoding the client wrote one way and signed another would be refused by the store; and
// dockerd reads back, byte for byte, the filters the gate wrote.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace dockgate::common {

// Which bytes an encoding writes as they are; every other byte becomes %XX.
enum class percent_keep : std::uint8_t {
  unreserved,            // RFC 3986's unreserved: A-Z a-z 0-9 - . _ ~ (a query value; SigV4)
  unreserved_and_slash,  // the same and '/' (an S3 object key in a path; SigV4)
};

// `text` with every byte outside `keep` as '%' and two upper-case hex digits. A space is
// %20, never '+': SigV4's UriEncode requires %20, and Go's url.ParseQuery (dockerd) reads
// %20 as a space too.
std::string percent_encode(std::string_view text, percent_keep keep = percent_keep::unreserved);

// A query key or value decoded as dockerd reads it (Go's url.ParseQuery, which follows
// application/x-www-form-urlencoded): %XX (hex digits in either case) is that byte, '+' is
// a space, every other byte is itself. nullopt when a '%' is not followed by two hex
// digits (dockerd answers such a query with 400).
std::optional<std::string> percent_decode_query(std::string_view text);

}  // namespace dockgate::common
