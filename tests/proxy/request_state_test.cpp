// request_state.hpp: a request on a kept-alive connection starts from a fresh state, with
// nothing of the request before it, and without an allocation: the strings' capacity and
// the extras the connection made are carried over, emptied.
#include "request_state.hpp"

#include <catch2/catch.hpp>

using namespace dockgate::proxy;

namespace {

// A state as a request leaves it: every field away from its fresh value.
void fill(request_state& s) {
  s.audit.verdict = "deny";
  s.audit.rule = "owner";
  s.audit.status = 404;
  s.audit.hijacked = true;
  s.audit.bytes_in = s.audit.bytes_out = 7;
  s.id_size = 21;
  s.started = std::chrono::steady_clock::now();
  const std::string long_text(200, 'x');  // past the strings' inline capacity
  for (std::string* text : {&s.path, &s.object_name, &s.object_id, &s.query, &s.forward_version,
                            &s.target, &s.event_line, &s.owned_events})
    *text = long_text;
  s.endless_stream = s.document = s.create_answer = true;
  s.version = {1, 41};
  s.daemon.api_version = "1.41";
  s.answer_filter = dockgate::policy::owned_answer::events;
  s.body_remaining = 5;
  s.framing = response_framing::chunked;
  s.response_status = 200;
  s.response_keep_alive = s.upstream_keeps = s.response_head_pending = s.response_chunked_in = true;
  s.stream_ended = s.stream_waiting = s.watch_pending = s.upstream_active = s.upstream_ended = true;
  s.client_gone = s.client_ended = s.client_writing = s.relay_failed = true;
  s.events_shareable = s.events_shared = s.write_waiting = s.watch_epoll = s.end_posted =
      s.hub_ended = true;
  s.hub = reinterpret_cast<events_hub*>(&s);  // only compared
  s.extras = std::make_unique<request_extras>();
  for (std::string* text : {&s.extras->json_body, &s.extras->would, &s.extras->dropped,
                            &s.extras->seen, &s.extras->object_image, &s.extras->exec_id})
    *text = long_text;
  s.extras->changes.push_back({"HostConfig.Memory", "clamped", {}, {}});
  s.extras->warnings.push_back("clamped");
}

}  // namespace

TEST_CASE("request state: the next request's is fresh, on the last one's storage", "[request]") {
  request_state last;
  fill(last);
  const char* path_storage = last.path.data();
  const char* target_storage = last.target.data();
  const request_extras* extras = last.extras.get();

  request_state next = request_state::after(last);

  // Nothing of the last request.
  const request_state fresh;
  CHECK(next.audit.verdict.empty());
  CHECK(next.audit.rule.empty());
  CHECK(next.audit.status == 0);
  CHECK_FALSE(next.audit.hijacked);
  CHECK(next.audit.bytes_in == 0);
  CHECK(next.audit.bytes_out == 0);
  CHECK(next.id_size == 0);
  CHECK(next.started == fresh.started);
  for (const std::string* text :
       {&next.path, &next.object_name, &next.object_id, &next.query, &next.forward_version,
        &next.target, &next.event_line, &next.owned_events})
    CHECK(text->empty());
  CHECK_FALSE(next.endless_stream);
  CHECK_FALSE(next.document);
  CHECK_FALSE(next.create_answer);
  CHECK(next.version == fresh.version);
  CHECK_FALSE(next.daemon.api_version);
  CHECK(next.answer_filter == dockgate::policy::owned_answer::as_is);
  CHECK(next.body_remaining == 0);
  CHECK(next.framing == response_framing::none);
  CHECK(next.response_status == 0);
  for (bool flag :
       {next.response_keep_alive, next.upstream_keeps, next.response_head_pending,
        next.response_chunked_in, next.stream_ended, next.stream_waiting, next.watch_pending,
        next.upstream_active, next.upstream_ended, next.client_gone, next.client_ended,
        next.client_writing, next.relay_failed, next.events_shareable, next.events_shared,
        next.write_waiting, next.watch_epoll, next.end_posted, next.hub_ended})
    CHECK_FALSE(flag);
  CHECK(next.hub == nullptr);
  REQUIRE(next.extras);
  for (const std::string* text :
       {&next.extras->json_body, &next.extras->would, &next.extras->dropped, &next.extras->seen,
        &next.extras->object_image, &next.extras->exec_id})
    CHECK(text->empty());
  CHECK(next.extras->changes.empty());
  CHECK(next.extras->warnings.empty());

  // The same storage: nothing allocated again for the next request.
  CHECK(next.path.data() == path_storage);
  CHECK(next.target.data() == target_storage);
  CHECK(next.path.capacity() >= 200);
  CHECK(next.owned_events.capacity() >= 200);
  CHECK(next.extras.get() == extras);
  CHECK(next.extras->json_body.capacity() >= 200);
  CHECK(next.extras->changes.capacity() >= 1);
}

TEST_CASE("request state: a connection that never needed the extras does not get them",
          "[request]") {
  request_state last;
  last.path = "/_ping";
  request_state next = request_state::after(last);
  CHECK_FALSE(next.extras);
  CHECK(next.path.empty());
}
