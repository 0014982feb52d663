// Steps 5 and 6 of the request path (connection.hpp) for an upload by archive under a
// profile with an upload rule (docs/policy.md, "uploads"): PutContainerArchive's body.
//
// Invariants kept here:
// - The body is read whole into an unnamed file (upload_spool.hpp) before anything of it
//   is forwarded, its entries judged by the policy (policy::review_upload), and what goes
//   up is the gate's own tar of what was kept, with a Content-Length: a refusal, a
//   malformed archive or a client that stops mid-body leaves the daemon with nothing, so
//   there is never a half-written upload.
// - The audit line records the entries' count and bytes and the path the write was
//   turned into, never a file's content or name.
#include <unistd.h>

#include <algorithm>

#include "connection.hpp"
#include "dockgate/policy/query.hpp"
#include "dockgate/policy/upload_archive.hpp"
#include "socket_io.hpp"
#include "upload_spool.hpp"

namespace dockgate::proxy {

namespace {

// The body as sent may hold, beside max_bytes of content, the tar's headers and padding.
std::uint64_t raw_limit(const policy::upload_rule& rule) {
  return 2 * rule.max_bytes + (std::uint64_t{1} << 20);
}

std::string query_path(std::string_view query) {
  auto params = policy::parse_query(query);
  if (params)
    for (auto& p : *params)
      if (p.key == "path") return std::move(p.value);
  return {};
}

}  // namespace

net::awaitable<bool> connection::refuse_upload(const policy::deny& d) {
  req_.audit.verdict = "deny";
  co_await refuse(d.status, d.rule, d.reason);
  co_return false;
}

// Step 5 for an upload: the client's archive spooled (under raw_limit), its entries read
// and judged, the gate's tar written; the query's path replaced when the plan says so.
net::awaitable<bool> connection::read_upload_body() {
  const policy::upload_rule& rule = *profile_->rules.uploads;
  const auto too_large = [&] {
    return policy::upload_refusal(*profile_, "body exceeds the profile's max_bytes", 413);
  };
  if (head_->content_length.value_or(0) > raw_limit(rule))
    co_return co_await refuse_upload(too_large());
  upload_spool in;
  std::string error;
  if (!in.open(error)) co_return co_await refuse_upload({500, "uploads", "dockgate: " + error});
  for (bool done = false; !done;) {
    auto [status, data] = co_await next_body_piece();
    switch (status) {
      case body_piece::data:
        if (in.size() + data.size() > raw_limit(rule))
          co_return co_await refuse_upload(too_large());
        if (!in.append(data))
          co_return co_await refuse_upload(
              {500, "uploads", "dockgate: cannot spool the upload (no room for it?)"});
        break;
      case body_piece::done:
        done = true;
        break;
      case body_piece::malformed:
        co_return co_await refuse_upload({400, "framing", "dockgate: malformed chunked body"});
      case body_piece::closed:
        co_return false;
    }
  }
  req_.audit.bytes_in = in.size();
  auto read = in.entries(rule.max_bytes);
  if (read.too_large) co_return co_await refuse_upload(too_large());
  if (!read.error.empty())
    co_return co_await refuse_upload(
        policy::upload_refusal(*profile_, "body is not a tar archive: " + read.error, 400));
  const std::string path = query_path(req_.query);
  auto reviewed = policy::review_upload(*profile_, path, read.entries);
  if (auto* d = std::get_if<policy::deny>(&reviewed)) co_return co_await refuse_upload(*d);
  const auto& plan = std::get<policy::upload_plan>(reviewed);
  auto& x = extras();
  x.upload.emplace();
  if (!x.upload->open(error) || !in.write_planned(plan, *x.upload, error))
    co_return co_await refuse_upload(policy::upload_refusal(*profile_, "body: " + error, 400));
  if (plan.path != path) {
    // A write at a parent of a target, made one into the target: the forwarded request line
    // (serialised already in out_) names the target; a trailing "/" is left out.
    const bool cleaned = path == plan.path + "/";
    x.changes.push_back({"query:path", cleaned ? "upload path cleaned" : "upload into target",
                         policy::to_json(path), policy::to_json(plan.path)});
    req_.query = policy::with_upload_path(req_.query, plan.path);
    req_.target.resize(std::min(req_.target.find('?'), req_.target.size()));
    req_.target += '?';
    req_.target += req_.query;
    const auto line_end = out_.find("\r\n");
    out_.replace(0, line_end, "PUT " + req_.target + " HTTP/1.1");
  }
  std::size_t kept = 0;
  for (const auto& name : plan.names) kept += name ? 1 : 0;
  x.changes.push_back(
      {"archive", "upload checked", std::nullopt,
       "{\"entries\":" + std::to_string(kept) + ",\"bytes\":" + std::to_string(plan.bytes) + "}"});
  req_.audit.changes = x.changes;
  co_return true;
}

// Step 6 for an upload: the gate's tar, from its file, after the head (which carries its
// Content-Length).
net::awaitable<bool> connection::forward_upload() {
  const upload_spool& tar = *req_.extras->upload;
  std::string& block = req_.extras->json_body;  // a buffer the request does not use otherwise
  block.resize(64 * 1024);
  std::uint64_t offset = 0;
  while (offset < tar.size()) {
    const ssize_t n = ::pread(tar.fd(), block.data(), block.size(), static_cast<off_t>(offset));
    if (n <= 0) {
      upstream_.reset();  // the daemon saw a partial request: that connection is unusable
      co_await refuse(500, "uploads", "dockgate: cannot read the checked archive back");
      co_return false;
    }
    auto [ec, written] =
        co_await write_all(*upstream_, net::buffer(block.data(), static_cast<std::size_t>(n)));
    if (ec) {
      upstream_.reset();
      co_await refuse(502, "upstream", "dockgate: lost the connection to the Docker daemon");
      co_return false;
    }
    offset += static_cast<std::uint64_t>(n);
  }
  block.clear();
  co_return true;
}

}  // namespace dockgate::proxy
