#pragma once
// One client connection: the request path of DESIGN.md (read head, route, decide,
// forward, stream or hijack, record), one request at a time.

#include <array>
#include <memory>
#include <optional>
#include <string>

#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/parser.hpp>

#include "context.hpp"
#include "dockgate/policy/body_review.hpp"
#include "dockgate/proxy/audit.hpp"
#include "dockgate/proxy/chunked.hpp"
#include "dockgate/proxy/http_head.hpp"

namespace dockgate::proxy {

class connection {
 public:
  connection(proxy_context& ctx, protocol::socket socket, std::string client,
             const policy::client_identity& identity);
  ~connection();
  connection(const connection&) = delete;
  connection& operator=(const connection&) = delete;

  net::awaitable<void> run();

  // Graceful shutdown: an idle connection closes now, a busy one after its response.
  void shutdown();
  // Deadline passed: close both sockets, whatever is in flight.
  void abort();

 private:
  enum class outcome { keep_alive, close };
  // What the proxy does to a response body on its way back.
  enum class response_filter { none, container_list, events, create_warnings, networks, volume_list, data_usage };
  // How a response body is framed towards the client.
  enum class response_framing { none, length, chunked, raw };

  net::awaitable<outcome> serve_one();
  net::awaitable<bool> read_head(std::size_t& head_size);
  net::awaitable<void> refuse(unsigned status, std::string_view rule, std::string_view message);
  net::awaitable<bool> connect_upstream();
  void serialize_request_head(bool upgrade);
  // Ownership and version pinning: builds target_ for the forwarded request. Returns
  // false after answering the client itself.
  net::awaitable<bool> prepare_target(const policy::route& r);
  net::awaitable<bool> learn_api_version();
  // A GET to the daemon on the upstream connection (inspect, version); status 0 on error.
  net::awaitable<std::pair<unsigned, std::string>> upstream_get(std::string_view target);
  net::awaitable<std::pair<unsigned, std::string>> upstream_request(std::string_view method, std::string_view target,
                                                                    std::string_view json);
  // The networks and volumes a reviewed body names are the profile's (creating missing
  // volumes with its label); the message of the refusal if not.
  net::awaitable<std::optional<policy::deny>> check_named_objects(const policy::route& r, policy::rewrite& rw);
  net::awaitable<std::optional<std::string>> owned_container_id(std::string_view reference);
  // Why a container's binds may not be mounted now (check_bind_source), if they may not.
  net::awaitable<std::optional<std::string>> binds_problem(const std::string& container);
  net::awaitable<void> relay_filtered_list(boost::beast::http::response_parser<boost::beast::http::buffer_body>& parser, bool keep);
  net::awaitable<bool> read_client_more();
  enum class body_piece { data, done, malformed, closed };
  net::awaitable<std::pair<body_piece, std::string_view>> next_body_piece();
  net::awaitable<bool> read_json_body(std::size_t limit);
  net::awaitable<bool> forward_body();
  net::awaitable<outcome> relay_response(bool hijack_allowed);
  net::awaitable<void> splice(std::string_view response_leftover);
  // Serialises the daemon's response head into out_, minus its hop-by-hop headers.
  void write_response_head(const boost::beast::http::response_header<>& res,
                           response_framing framing, bool keep_alive);
  void finish_audit(unsigned status);

  std::string_view buffered() const { return {in_.get() + in_begin_, in_end_ - in_begin_}; }
  void consume(std::size_t n) { in_begin_ += n; }
  void compact();
  static const policy::profile& no_profile();
  // True if a policy refusal must be enforced; in audit mode records it instead.
  bool enforce(const policy::deny& d);

  proxy_context& ctx_;
  stream client_;
  std::optional<stream> upstream_;
  std::string client_id_;
  policy::client_identity identity_;
  std::shared_ptr<const policy::policy> policy_;  // the policy of the request being served
  const policy::profile* profile_ptr_;  // nullptr: no profile for this client
  const policy::profile* profile_;      // profile_ptr_, or the empty profile
  std::string would_;  // audit mode: what the profile would have refused or changed

  // Client bytes: the head is parsed in place, so head fields view into this buffer
  // until the head has been forwarded.
  static constexpr std::size_t in_capacity = max_head_bytes + 16 * 1024;
  std::unique_ptr<char[]> in_;
  std::size_t in_begin_ = 0;
  std::size_t in_end_ = 0;

  beast::flat_buffer upstream_buffer_;
  std::string out_;        // serialisation buffer, reused across requests
  std::string json_body_;  // a JSON request body, read whole before it is forwarded
  static constexpr std::size_t chunk_size = 16 * 1024;
  std::unique_ptr<char[]> body_;  // one fixed buffer for every forwarded body chunk

  request_head head_;
  chunked_decoder body_decoder_;      // the request body's framing state
  std::uint64_t body_remaining_ = 0;  // Content-Length bytes still to come
  std::string path_;     // the request's path, for the audit line
  std::string changes_;  // what the profile forced or clamped, for the audit line
  std::string query_;    // the query forwarded: the client's parameters the daemon reads
  std::string forward_version_;    // the API version forwarded ("1.41")
  policy::api_version version_{};  // the same, for the body review
  std::string dropped_;  // what the gate left out because the daemon ignores it
  std::vector<std::string> warnings_;  // added to a create answer: what the profile changed
  // A body on an operation that takes none is read up to this and never forwarded.
  static constexpr std::size_t ignored_body_limit = 64 * 1024;
  std::string target_;   // the forwarded request target (pinned version, full IDs)
  response_filter filter_ = response_filter::none;
  std::string event_line_;  // a partial event line while filtering events
  audit_record audit_;
  std::chrono::steady_clock::time_point started_;
  bool idle_ = true;
  bool endless_stream_ = false;  // events, logs, stats, wait: ended cleanly if the daemon goes
  bool upstream_ended_ = false;  // the daemon's side of a relayed body ended or failed
  bool client_gone_ = false;
};

}  // namespace dockgate::proxy
