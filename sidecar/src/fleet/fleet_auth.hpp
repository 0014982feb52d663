#pragma once
// Member-to-member trust in the fleet: how one sidecar proves to another that a call it
// forwards comes from a member, and how the receiver checks it. Internal to the sidecar.
//
// Invariants (issue 39, item 2), and why:
// - A member forwards only to the members the operator listed (SANDBOX_FLEET_MEMBERS,
//   instance=http://host:port), at the address listed there. The store says which
//   instance holds a session, never where to dial: anyone who can write the store could
//   otherwise send every call — bodies, files, the client's key — to a server of theirs
//   and answer in the session's name (fleet.cpp, fleet::forward).
// - The client's Authorization never leaves the member it was sent to. The hop carries
//   the fleet's own credential instead: X-Dockgate-Fleet, an HMAC-SHA256 under the key in
//   SANDBOX_FLEET_KEY_FILE over the sender, the receiver, the time, a nonce, the method,
//   the path and the body's SHA-256. HMAC rather than a bearer of the fleet's own: the hop
//   is plain HTTP, and a signature seen on the wire is good for that one call to that one
//   member only (the receiver, the call and its body are signed; a nonce is accepted once;
//   the time within `fleet_clock_skew_s`), where a bearer seen once opens every member.
//   Rather than TLS client certificates: no CA to run, and it needs no change to the
//   shared HTTP server; the cost is that the hop's bodies are not encrypted (docs/sidecar.md).
// - A call that says it was forwarded (X-Dockgate-Forwarded, or X-Dockgate-Fleet) is
//   served only with a valid fleet signature addressed to this instance; the client's
//   bearer key does not stand in for it (service.cpp, service::handle). Only a member
//   could have authenticated the client, so the signature is also the assertion that the
//   caller was.

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

namespace dockgate::sidecar {

inline constexpr std::int64_t fleet_clock_skew_s = 300;

// The X-Dockgate-Fleet value for a call from `from` to `to`, signed at `unix_time` with
// `nonce` (hex): "v1 <from> <to> <time> <nonce> <mac hex>".
std::string fleet_signature(std::string_view key, std::string_view from, std::string_view to,
                            std::int64_t unix_time, std::string_view nonce, std::string_view method,
                            std::string_view path, std::string_view body);

// The receiving side: checks signatures addressed to `self` and remembers the nonces it
// accepted for as long as their time is acceptable, so that none is accepted twice.
class fleet_verifier {
 public:
  fleet_verifier(std::string key, std::string self)
      : key_(std::move(key)), self_(std::move(self)) {}
  // nullopt when `header` is a valid signature of this call for this instance, sent by
  // `forwarded_by` (the X-Dockgate-Forwarded value: it must name the signer), at `now`;
  // otherwise why not (for the 401's detail: names no secret).
  std::optional<std::string> check(std::string_view header, std::string_view forwarded_by,
                                   std::string_view method, std::string_view path,
                                   std::string_view body, std::int64_t now);

 private:
  std::string key_, self_;
  std::mutex m_;
  std::map<std::string, std::int64_t> nonces_;  // nonce -> when it may be forgotten
  std::int64_t swept_ = 0;                      // when the forgotten ones last went
};

}  // namespace dockgate::sidecar
