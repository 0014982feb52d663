// Steps 1 to 3 of the request path (connection.hpp): the request head is read, parsed
// strictly, routed to one operation and decided on, before any byte of it reaches the
// daemon.
//
// Invariant: nothing reaches the daemon before the head has been parsed strictly, routed
// to one operation and allowed by the profile (decide, review_query, shape_request: the
// decisions are policy's values, applied here); after any refusal the connection is
// closed, so no request pipelined behind a refused one is ever read.
#include <cstdint>
#include <tuple>

#include "connection.hpp"
#include "dockgate/policy/body_rules.hpp"
#include "dockgate/policy/query.hpp"
#include "dockgate/policy/request_shape.hpp"
#include "readiness.hpp"
#include "socket_io.hpp"

namespace dockgate::proxy {

namespace {

// `value` in lower-case hex, at least `digits` of them (zeros in front), at `out`; returns
// the end (at most 16 characters).
char* append_hex(char* out, std::uint64_t value, int digits) {
  char reversed[16];
  int n = 0;
  do {
    reversed[n++] = "0123456789abcdef"[value & 15];
    value >>= 4;
  } while (value != 0);
  while (n < digits) reversed[n++] = '0';
  while (n > 0) *out++ = reversed[--n];
  return out;
}

std::string_view path_of(std::string_view target) {
  return target.substr(0, target.find('?'));
}

}  // namespace

net::awaitable<bool> connection::read_head(std::size_t& head_size) {
  set_deadline(ctx_.options.head_timeout);
  head_size = 0;
  for (;;) {
    std::string_view have = buffered();
    if (std::size_t end = http::find_head_end(have.substr(0, http::max_head_bytes + 4)); end != 0) {
      head_size = end;
      co_return true;
    }
    if (have.size() > http::max_head_bytes) co_return true;  // head_size 0: too large
    idle_ = have.empty();
    if (idle_ && ctx_.stopping) co_return false;
    if (idle_) {
      // Waiting for the next request: no buffer and no parsed head held meanwhile, and no
      // system call either (readiness.hpp).
      release_in_buffer_if_empty();
      ctx_.give_back_head(std::move(head_));
      auto [wec] = co_await until_readable(client_);
      if (wec) co_return false;
    }
    in_buffer();
    compact();
    if (in_end_ == in_capacity_ && !grow_in_buffer()) co_return true;  // too large
    const net::mutable_buffer room(in_data_ + in_end_, in_capacity_ - in_end_);
    boost::system::error_code ec;
    std::size_t n = 0;
    if (idle_) {
      std::tie(ec, n) = read_now(client_, room);  // woken for it: no asio operation
      if (ec == net::error::would_block) {
        not_readable_yet(client_);  // nothing there after all: wait again, holding nothing
        continue;
      }
    } else {
      std::tie(ec, n) = co_await client_.async_read_some(room, use_tuple);
    }
    idle_ = false;
    in_end_ += n;
    if (ec) {
      // EOF, reset, timeout or shutdown: nothing to answer. A client that ended between
      // two requests sends nothing more: no lingering close for it (close_gracefully).
      client_done_ = ec == net::error::eof && buffered().empty();
      co_return false;
    }
    if (n < room.size()) drained_unless_ended(client_);
  }
}

// Steps 2 and 3, with no I/O: the request parsed, routed, allowed by the profile, its
// query reviewed and its shape known, or the refusal to answer instead.
connection::admission connection::admit_request(std::size_t head_size) {
  if (!head_) head_ = ctx_.take_head();
  // A reloaded policy (SIGHUP) applies from the next request on; a request in flight, a
  // stream or a hijacked session keeps the policy it started with (policy_ holds it).
  if (policy_ != ctx_.policy) {
    policy_ = ctx_.policy;
    profile_ptr_ = policy_->select(identity_);
    profile_ = profile_ptr_ ? profile_ptr_ : &no_profile();
  }
  // A fresh state for this request: nothing of the last one is seen (request_state.hpp).
  req_ = request_state::after(req_);
  // The clock is read once per request, here, when the head has arrived (vDSO: no system
  // call): the audit line's time, and the start of its duration.
  req_.started = std::chrono::steady_clock::now();
  req_.audit.time = std::chrono::system_clock::now();
  // "%08x-%012llx" (the gate's random prefix, the request's number), without printf.
  char* id_end = append_hex(req_.id.data(), ctx_.request_id_prefix, 8);
  *id_end++ = '-';
  id_end = append_hex(id_end, ++ctx_.requests, 12);
  req_.id_size = static_cast<std::uint8_t>(id_end - req_.id.data());

  // Step 2: parse and route.
  if (head_size == 0) return policy::deny{431, "framing", "dockgate: request head too large"};
  if (auto err = http::parse_request_head(buffered().substr(0, head_size), *head_)) {
    std::string message = "dockgate: ";
    message += http::head_error_text(*err);
    return policy::deny{400, "framing", std::move(message)};
  }
  req_.audit.method = http::method_name(head_->method);
  req_.path.assign(path_of(head_->target));  // the head's bytes move once the body is read

  auto routed = policy::route_request(head_->method, head_->target);
  if (auto* err = std::get_if<policy::route_error>(&routed)) {
    if (*err == policy::route_error::unsupported_version) return unsupported_version{};
    std::string message = "dockgate: ";
    message += policy::route_error_text(*err);
    message += ": ";
    message += req_.audit.method;
    message += ' ';
    message += req_.path;
    return policy::deny{policy::route_error_status(*err), "route", std::move(message)};
  }
  const auto& r = std::get<policy::route>(routed);
  req_.audit.operation = policy::operation_name(r.op);
  note_object(r);

  // Step 3: decide. The profile's decision, then its review of the query.
  if (!profile_ptr_)
    return policy::deny{403, "client", "dockgate: no profile for client " + client_id_};
  auto decision = policy::decide(*profile_, r);
  if (auto* d = std::get_if<policy::deny>(&decision); d && enforce(*d)) return std::move(*d);
  // The query that goes upstream is the gate's: what the daemon ignores is left out.
  auto reviewed_query = policy::review_query(*profile_, r);
  if (auto* d = std::get_if<policy::deny>(&reviewed_query)) {
    if (enforce(*d)) return std::move(*d);
    req_.query.assign(r.query);  // audit mode: forwarded as sent
  } else {
    auto& q = std::get<policy::query_review>(reviewed_query);
    if (!q.changes.empty() && profile_->mode == policy::profile::mode_kind::audit) {
      // Audit mode: the client's query goes up as sent; what would change is recorded.
      auto& would = extras().would;
      for (const auto& c : q.changes) {
        would += would.empty() ? "change " : ", ";
        would += c.field + " " + c.action;
      }
      req_.audit.would = would;
      q.query.assign(r.query);
    } else if (!q.changes.empty()) {
      auto& changes = extras().changes;
      changes.insert(changes.end(), q.changes.begin(), q.changes.end());
      req_.audit.changes = changes;
    }
    req_.query = std::move(q.query);
    for (const auto& name : q.dropped) {
      auto& dropped = extras().dropped;
      dropped += dropped.empty() ? "query:" : ",query:";
      dropped += name;
    }
  }
  // Hijack, endless stream, what becomes of the body, or a refusal (request_shape.hpp).
  const bool uploads =
      profile_->rules.uploads && profile_->mode == policy::profile::mode_kind::enforce;
  const auto shaped = policy::shape_request(r.op, policy::facts_of(*head_), uploads);
  if (const auto* refused = std::get_if<policy::shape_refusal>(&shaped))
    return policy::deny{refused->status, std::string(refused->rule), std::string(refused->reason)};
  const auto& shape = std::get<policy::request_shape>(shaped);
  req_.endless_stream = shape.endless_stream;
  req_.document = shape.document;
  if (shape.body == policy::request_body::dropped) {
    auto& dropped = extras().dropped;
    dropped += dropped.empty() ? "body" : ",body";
  }
  req_.audit.verdict = "allow";
  return admitted{r, shape};
}

// The object the request names (its path parameter) or creates (a container's name, the
// reference an image is pulled by), for the audit line.
void connection::note_object(const policy::route& r) {
  if (audit_object_type(req_.audit.operation).empty()) return;
  if (!r.param.empty()) {
    req_.object_name.assign(r.param);
    return;
  }
  if (r.op != policy::operation::ContainerCreate && r.op != policy::operation::ImageCreate) return;
  auto params = policy::parse_query(r.query);
  if (!params) return;
  std::string_view name, from_image, tag;
  for (const auto& p : *params) {
    if (p.key == "name") name = p.value;
    if (p.key == "fromImage") from_image = p.value;
    if (p.key == "tag") tag = p.value;
  }
  if (r.op == policy::operation::ContainerCreate) {
    // Only a name in Docker's grammar: the audit line logs no query text of its own.
    if (policy::valid_object_name(name)) req_.object_name.assign(name);
  } else if (!from_image.empty()) {
    std::string error;
    if (auto ref = policy::effective_pull_reference(from_image, tag, &error))
      req_.object_name = *ref;
  }
}

// A version the route table does not know, answered in the daemon's words (a client reads
// "too new" to negotiate down), naming the daemon's version when it is too new.
net::awaitable<void> connection::refuse_version() {
  const std::string_view segment = policy::version_segment(req_.path);
  ctx_.sync_daemon();
  if (policy::version_too_new(segment) && !ctx_.daemon.api_version && co_await connect_upstream())
    co_await learn_api_version();
  const auto d = policy::version_refusal(segment, known_daemon_version());
  co_await refuse(d.status, d.rule, d.reason);
}

}  // namespace dockgate::proxy
