// The proxy path to a sandbox's own ports (port_proxy.hpp; docs/opensandbox-api.md, "Other
// ports"): OpenSandbox's server proxy (`api/proxy.py`) and execd's `/proxy/<port>` reach an
// app in the sandbox over its bridge address; dockgate's sandboxes have no network to
// reach, so each request goes over a relay exec in the sandbox (commands::connect), as
// `kubectl port-forward` reaches a pod.
//
// Invariants it keeps:
// - One request per relay, sent with `Connection: close`: the app's answer ends where its
//   framing says (Content-Length, chunked, or the close), and nothing of a second request
//   can be read as part of the first.
// - What is the sidecar's never reaches the app: the access token, the API key,
//   Authorization and Cookie (dropped as OpenSandbox's server drops them), hop-by-hop
//   fields; Host is the app's own address, the client's goes in X-Forwarded-Host.
// - The app's answer is relayed as it comes (its body streamed, re-framed as chunks), with
//   its status and its fields but the hop-by-hop ones; an answer that is not HTTP/1.x, or
//   a head over 64 KiB, is a 502 of ours, never relayed half-read.
// - The sidecar's failures are told from the app's: nothing listening on the port is 502
//   PROXY::CONNECT_FAILED, an image without a relay tool 502 PROXY::NO_RELAY, a port that
//   is not 1–65535 400: each in OpenSandbox's {code, message}.
// - An Upgrade (a WebSocket) keeps its relay: the app's 101 goes to the client and the two
//   connections are joined both ways until either ends; any other answer to it is relayed
//   as any answer is.
#include "front/opensandbox/port_proxy.hpp"

#include <strings.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <thread>

#include "commands/commands.hpp"
#include "dockgate/http/chunked.hpp"
#include "dockgate/http/request_head.hpp"
#include "dockgate/http/response_head.hpp"
#include "front/opensandbox/replies.hpp"
#include "util/util.hpp"

namespace dockgate::sidecar::opensandbox {

using namespace std::chrono_literals;

namespace {

constexpr std::size_t max_head = 64 * 1024;
constexpr std::size_t max_frame = 1024 * 1024;
// How long the app may be silent before the forward is given up (a slow answer, a
// long-polling or event-stream app keeps writing within it).
constexpr auto idle_limit = 300s;

bool same_name(std::string_view a, std::string_view b) {
  return a.size() == b.size() && ::strncasecmp(a.data(), b.data(), a.size()) == 0;
}

// Fields that are the connection's, or the sidecar's, and never go to the app (request) or
// back to the client (answer): RFC 9110 §7.6.1's hop-by-hop fields and the framing.
bool hop_by_hop(std::string_view name) {
  for (std::string_view h :
       {"connection", "keep-alive", "proxy-connection", "proxy-authenticate", "proxy-authorization",
        "te", "trailer", "transfer-encoding", "upgrade", "content-length", "host"})
    if (same_name(name, h)) return true;
  return false;
}

bool kept_from_app(std::string_view name) {
  for (std::string_view h : {"x-execd-access-token", "open-sandbox-api-key", "cookie", "expect",
                             "x-forwarded-host", "x-forwarded-proto"})
    if (same_name(name, h)) return false;
  return !hop_by_hop(name);
}

std::optional<std::uint16_t> port_number(std::string_view text) {
  unsigned value = 0;
  if (text.empty() || text.size() > 5 ||
      !std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  std::from_chars(text.data(), text.data() + text.size(), value);
  if (value < 1 || value > 65535) return std::nullopt;
  return static_cast<std::uint16_t>(value);
}

// The request as the app receives it (an Upgrade asked for keeps its two fields).
std::string request_bytes(const http_request& r, std::uint16_t port, std::string_view rest,
                          std::optional<std::string_view> upgrade) {
  std::string out = r.method + " " + std::string(rest.empty() ? "/" : rest);
  if (!r.query.empty()) out += "?" + r.query;
  out += " HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port) + "\r\n";
  for (const auto& [name, value] : r.fields)
    if (kept_from_app(name)) out += name + ": " + value + "\r\n";
  if (!r.accept.empty()) out += "Accept: " + r.accept + "\r\n";
  if (auto host = r.field("host")) out += "X-Forwarded-Host: " + std::string(*host) + "\r\n";
  out += "X-Forwarded-Proto: http\r\n";
  if (!r.body.empty() || (r.method != "GET" && r.method != "HEAD" && r.method != "DELETE"))
    out += "Content-Length: " + std::to_string(r.body.size()) + "\r\n";
  if (upgrade)
    out += "Connection: Upgrade\r\nUpgrade: " + std::string(*upgrade) + "\r\n\r\n";
  else
    out += "Connection: close\r\n\r\n";
  out += r.body;
  return out;
}

bool send_all_to(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

// The Upgrade field of the app's answer head (its field lines).
std::optional<std::string> upgrade_of(std::string_view lines) {
  while (!lines.empty()) {
    const auto eol = lines.find("\r\n");
    const std::string_view line = lines.substr(0, eol);
    lines.remove_prefix(eol == std::string_view::npos ? lines.size() : eol + 2);
    const auto colon = line.find(':');
    if (colon == std::string_view::npos || !same_name(line.substr(0, colon), "upgrade")) continue;
    std::string_view value = line.substr(colon + 1);
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t'))
      value.remove_prefix(1);
    return std::string(value);
  }
  return std::nullopt;
}

// Reads the relay's next stdout bytes into `into`; stderr goes to `err` (at most 4 KiB).
// false at the relay's end (or a read error, a silent app past idle_limit).
bool read_more(client::exec_stream& s, std::string& into, std::string& err) {
  for (;;) {
    client::exec_stream::read_error e{};
    auto f = s.read(client::clock_type::now() + idle_limit, max_frame, e);
    if (!f) return false;
    if (f->stream == 1) {
      into += f->data;
      return true;
    }
    if (f->stream == 2 && err.size() < 4096) err += f->data.substr(0, 4096 - err.size());
  }
}

// Why the relay ended without a byte from the app.
http_reply no_answer(std::string_view err, std::uint16_t port) {
  if (err.find(no_relay_marker) != std::string_view::npos)
    return error(502, "PROXY::NO_RELAY",
                 "the sandbox's image has none of python3, bash or nc to reach port " +
                     std::to_string(port) + " with");
  std::string why(err);
  if (const auto at = why.find(connect_failed_marker); at != std::string::npos)
    why.erase(at, connect_failed_marker.size());
  while (!why.empty() && (why.front() == ' ' || why.front() == '\n')) why.erase(0, 1);
  return error(502, "PROXY::CONNECT_FAILED",
               "nothing answered on port " + std::to_string(port) + " in the sandbox" +
                   (why.empty() ? std::string() : ": " + valid_utf8(why)));
}

// The answer's fields the client gets (name, value), and its Content-Type.
header_fields answer_fields(std::string_view lines, std::string& content_type) {
  header_fields out;
  while (!lines.empty()) {
    const auto eol = lines.find("\r\n");
    std::string_view line = lines.substr(0, eol);
    lines.remove_prefix(eol == std::string_view::npos ? lines.size() : eol + 2);
    const auto colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    std::string_view name = line.substr(0, colon), value = line.substr(colon + 1);
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t'))
      value.remove_prefix(1);
    while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
    if (same_name(name, "content-type"))
      content_type = std::string(value);
    else if (!hop_by_hop(name))
      out.emplace_back(std::string(name), std::string(value));
  }
  return out;
}

struct app_answer {
  http::response_head head;
  std::string buffer;  // the head, then what came of the body
  std::size_t head_size = 0;
};

// Reads the app's final head (1xx interim answers skipped, but a 101 Switching Protocols);
// nullopt with `failure` set.
std::optional<app_answer> read_head(client::exec_stream& s, std::uint16_t port,
                                    http_reply& failure) {
  app_answer a;
  std::string err;
  for (;;) {
    std::size_t end = 0;
    while ((end = http::find_head_end(a.buffer)) == 0) {
      if (a.buffer.size() > max_head) {
        failure = error(502, "PROXY::BAD_ANSWER", "the app's answer head is over 64 KiB");
        return std::nullopt;
      }
      if (!read_more(s, a.buffer, err)) {
        failure = a.buffer.empty() ? no_answer(err, port)
                                   : error(502, "PROXY::BAD_ANSWER",
                                           "the app closed before its answer's head was whole");
        return std::nullopt;
      }
    }
    if (!http::parse_response_head(std::string_view(a.buffer).substr(0, end), a.head)) {
      failure = error(502, "PROXY::BAD_ANSWER", "the app's answer is not HTTP/1.x");
      return std::nullopt;
    }
    if (a.head.status >= 200 || a.head.status == 101) {  // 101: an Upgrade's answer
      a.head_size = end;
      return a;
    }
    a.buffer.erase(0, end);  // 100 Continue, 103 Early Hints: not the answer
  }
}

// The body after the head, streamed to the client as the head frames it. false: cut
// (the app or the client went away mid-body).
bool relay_body(client::exec_stream& s, app_answer& a, reply_stream& out) {
  std::string data = a.buffer.substr(a.head_size), err;
  http::chunked_decoder chunks;
  std::uint64_t left = a.head.content_length.value_or(0);
  for (;;) {
    if (a.head.chunked) {
      for (;;) {
        auto res = chunks.feed(data);
        if (res.state == http::chunked_decoder::status::data && !out.write(res.data)) return false;
        data.erase(0, res.consumed);
        if (res.state == http::chunked_decoder::status::done) return true;
        if (res.state == http::chunked_decoder::status::error) return false;
        if (res.state == http::chunked_decoder::status::need_more) break;
      }
    } else {
      const std::size_t n =
          a.head.content_length
              ? static_cast<std::size_t>(std::min<std::uint64_t>(left, data.size()))
              : data.size();
      if (n && !out.write(std::string_view(data).substr(0, n))) return false;
      left -= a.head.content_length ? n : 0;
      data.clear();
      if (a.head.content_length && left == 0) return true;
    }
    if (!read_more(s, data, err)) return !a.head.chunked && !a.head.content_length;
  }
}

// After the app's 101: the client's connection and the relay joined both ways until either
// ends (the client's bytes to the app from a thread of its own, the app's to the client
// here). The client's end ends the relay's stdin; the app's end ends the client's
// connection.
void tunnel(client::exec_stream& s, reply_stream::raw_connection client_side, std::string early) {
  std::thread up([&s, fd = client_side.fd, pending = std::move(client_side.pending)] {
    if (!pending.empty() && !s.write(pending, client::clock_type::now() + 30s)) return;
    char buf[65536];
    for (;;) {
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0 || !s.write(std::string_view(buf, static_cast<std::size_t>(n)),
                             client::clock_type::now() + 30s))
        break;
    }
    s.shutdown_write();
  });
  std::string data = std::move(early), err;
  do {
    if (!data.empty() && !send_all_to(client_side.fd, data)) break;
    data.clear();
  } while (read_more(s, data, err));
  ::shutdown(client_side.fd, SHUT_RDWR);  // ends the other direction's recv
  up.join();
}

}  // namespace

http_reply forward_to_port(session_core& core, const http_request& r, const std::string& sandbox,
                           std::string_view port_text, std::string_view rest) {
  const auto port = port_number(port_text);
  if (!port)
    return error(400, "PROXY::INVALID_PORT",
                 "port " + valid_utf8(port_text) + " is not a port number (1-65535)");
  const auto upgrade = r.field("upgrade");
  if (upgrade && !r.stream)
    return error(501, "NOT_SUPPORTED", "an Upgrade needs a connection of its own");
  const commands cmds(core.config_of, core.engine, core.registry);
  auto relay = cmds.connect(sandbox, *port, client::clock_type::now() + 30s);
  if (!relay) return reply(relay.error());
  auto& s = relay.value();
  if (!s.write(request_bytes(r, *port, rest, upgrade), client::clock_type::now() + 30s))
    return error(
        502, "PROXY::CONNECT_FAILED",
        "the relay to port " + std::to_string(*port) + " ended before the request was sent");
  http_reply failure;
  auto answer = read_head(s, *port, failure);
  if (!answer) return failure;
  std::string content_type;
  header_fields fields = answer_fields(answer->head.fields, content_type);
  fields.emplace_back("X-Request-ID", request_id_of(r));
  if (upgrade && answer->head.status == 101) {
    const std::string protocol = upgrade_of(answer->head.fields).value_or(std::string(*upgrade));
    fields.emplace_back("Connection", "Upgrade");
    fields.emplace_back("Upgrade", protocol);
    auto raw = r.stream->switch_protocols(fields);
    if (raw) tunnel(s, std::move(*raw), answer->buffer.substr(answer->head_size));
    return {101, {}, false};
  }
  if (!answer->head.has_body(r.method == "HEAD") || !r.stream) {
    http_reply whole(answer->head.status);
    whole.headers = std::move(fields);
    if (!content_type.empty()) whole.content_type = content_type;
    return whole;
  }
  if (!r.stream->open(answer->head.status,
                      content_type.empty() ? "application/octet-stream" : content_type, fields))
    return {answer->head.status, {}, true};
  // A body cut short (the app or the client went away) is answered as not streamed: the
  // server then closes without the last chunk, so the client sees it cut, never whole.
  const bool whole = relay_body(s, *answer, *r.stream);
  return {answer->head.status, {}, whole};
}

}  // namespace dockgate::sidecar::opensandbox
