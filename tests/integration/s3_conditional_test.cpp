// S3's conditional writes through the sidecar's own client (s3_client::put_object with
// `if_match`), against the test store scripts/s3rver.sh starts: s3rver wrapped by
// scripts/s3rver-conditional.js, which answers them as AWS S3, MinIO and AIStor do.
// Plain s3rver ignores the conditions, and every case here then fails: that is what the
// lease and session records would meet on a store without them. Judged by the status
// codes and by the object's bytes read back, so a refused write is seen to write nothing.
#include <atomic>
#include <catch2/catch.hpp>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

#include "harness.hpp"
#include "storage/s3.hpp"
#include "storage/storage.hpp"

using dockgate::sidecar::s3_client;
using dockgate::sidecar::s3_config;
using dockgate::test::unique_name;

namespace {

std::string env_or(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// The bucket scripts/s3rver.sh configures, path-style. One attempt: a retried
// conditional PUT could meet its own first write and read as a refusal.
s3_config bucket() {
  s3_config c;
  c.endpoint = env_or("DOCKGATE_TEST_S3_ENDPOINT");
  c.bucket = env_or("DOCKGATE_TEST_S3_BUCKET");
  c.access_key = env_or("DOCKGATE_TEST_S3_ACCESS_KEY");
  c.secret_key = env_or("DOCKGATE_TEST_S3_SECRET_KEY");
  c.max_attempts = 1;
  return c;
}
s3_client store() {
  return s3_client(bucket());
}

const std::string create_only;  // put_object's "" : If-None-Match: *

std::string body_of(s3_client& s3, const std::string& key) {
  auto r = s3.get_object(key, 1 << 20);
  return r.status == 200 ? r.body : "<" + std::to_string(r.status) + ">";
}

}  // namespace

TEST_CASE("s3 conditional writes: create-only, replace-if-unchanged, a missing key",
          "[integration][s3]") {
  REQUIRE(
      !env_or("DOCKGATE_TEST_S3_ENDPOINT").empty());  // scripts/s3rver.sh start DIR, source DIR/env
  auto s3 = store();
  const std::string key = unique_name("conditional") + "/lease.json";

  SECTION("If-None-Match: * creates once, then answers 412 and leaves the object alone") {
    auto first = s3.put_object(key, "first", "application/json", &create_only);
    REQUIRE(first.status == 200);
    CHECK(!first.etag.empty());
    auto second = s3.put_object(key, "second", "application/json", &create_only);
    CHECK(second.status == 412);
    CHECK(second.body.find("<Code>PreconditionFailed</Code>") != std::string::npos);
    CHECK(body_of(s3, key) == "first");
  }

  SECTION("If-Match with the current ETag replaces (a new ETag), with the old one answers 412") {
    auto created = s3.put_object(key, "v1", "application/json", &create_only);
    REQUIRE(created.status == 200);
    // The ETag a HEAD reports is the one the PUT answered (what the sidecar compares).
    auto head = s3.head_object(key);
    REQUIRE(head.status == 200);
    CHECK(head.etag == created.etag);
    CHECK(!head.last_modified.empty());

    auto replaced = s3.put_object(key, "v2", "application/json", &created.etag);
    REQUIRE(replaced.status == 200);
    CHECK(!replaced.etag.empty());
    CHECK(replaced.etag != created.etag);
    CHECK(body_of(s3, key) == "v2");

    auto stale = s3.put_object(key, "v3 from a stale reader", "application/json", &created.etag);
    CHECK(stale.status == 412);
    CHECK(stale.body.find("<Code>PreconditionFailed</Code>") != std::string::npos);
    CHECK(body_of(s3, key) == "v2");
    CHECK(s3.head_object(key).etag == replaced.etag);
  }

  SECTION(
      "If-Match on a key that does not exist answers 404 NoSuchKey (as AWS does) and creates "
      "nothing") {
    const std::string etag = "0123456789abcdef0123456789abcdef";
    auto r = s3.put_object(key, "nobody had it", "application/json", &etag);
    CHECK(r.status == 404);
    CHECK(r.body.find("<Code>NoSuchKey</Code>") != std::string::npos);
    CHECK(s3.head_object(key).status == 404);
  }

  SECTION("an unconditional PUT still replaces whatever is there") {
    REQUIRE(s3.put_object(key, "a", "application/json", &create_only).status == 200);
    CHECK(s3.put_object(key, "b", "application/json").status == 200);
    CHECK(body_of(s3, key) == "b");
  }

  s3.delete_object(key);
}

TEST_CASE(
    "s3 conditional writes: of 20 concurrent create-only PUTs of one key exactly one succeeds",
    "[integration][s3]") {
  REQUIRE(!env_or("DOCKGATE_TEST_S3_ENDPOINT").empty());
  const std::string key = unique_name("conditional") + "/race.json";
  constexpr int writers = 20;

  // All threads are released together, so their PUTs are in flight at once.
  std::mutex m;
  std::condition_variable cv;
  int ready = 0;
  bool go = false;
  std::vector<unsigned> status(writers, 0);
  std::vector<std::thread> threads;
  for (int i = 0; i < writers; ++i) {
    threads.emplace_back([&, i] {
      auto s3 = store();
      {
        std::unique_lock lock(m);
        ++ready;
        cv.notify_all();
        cv.wait(lock, [&] { return go; });
      }
      status[i] =
          s3.put_object(key, "writer " + std::to_string(i), "application/json", &create_only)
              .status;
    });
  }
  {
    std::unique_lock lock(m);
    cv.wait(lock, [&] { return ready == writers; });
    go = true;
  }
  cv.notify_all();
  for (auto& t : threads) t.join();

  int created = 0, refused = 0, winner = -1;
  for (int i = 0; i < writers; ++i) {
    INFO("writer " << i << ": " << status[i]);
    if (status[i] == 200)
      ++created, winner = i;
    else if (status[i] == 412)
      ++refused;
    else
      FAIL_CHECK("neither 200 nor 412");
  }
  CHECK(created == 1);
  CHECK(refused == writers - 1);
  // The object holds the one winner's bytes, whole.
  auto s3 = store();
  if (winner >= 0) CHECK(body_of(s3, key) == "writer " + std::to_string(winner));
  s3.delete_object(key);
}

TEST_CASE(
    "s3 conditional writes through the object store: replace of a key that moved on reports "
    "changed",
    "[integration][s3]") {
  REQUIRE(!env_or("DOCKGATE_TEST_S3_ENDPOINT").empty());
  // The store the archives and the lease use (storage.cpp's s3_store), as open_store makes it.
  dockgate::sidecar::storage_spec spec;
  spec.provider = dockgate::sidecar::storage_provider::s3;
  spec.s3 = bucket();
  auto objects = dockgate::sidecar::open_store(spec, dockgate::sidecar::config{});
  REQUIRE(objects);
  const std::string key = unique_name("conditional") + "/record.json";
  bool changed = false;
  std::string error;

  auto g1 = objects->replace(key, "one", "application/json", "", changed, error);
  REQUIRE(g1);
  CHECK(!changed);
  // Created meanwhile by someone else: "" (absent) no longer holds.
  CHECK(!objects->replace(key, "two", "application/json", "", changed, error));
  CHECK(changed);
  CHECK(objects->get(key, 1024).data == "one");

  changed = false;
  auto g2 = objects->replace(key, "two", "application/json", *g1, changed, error);
  REQUIRE(g2);
  CHECK(!changed);
  CHECK(*g2 != *g1);
  // A writer that still holds g1 is refused, and says so as "changed", not as an error.
  CHECK(!objects->replace(key, "stale", "application/json", *g1, changed, error));
  CHECK(changed);
  CHECK(objects->get(key, 1024).data == "two");
  CHECK(objects->generation(key, error) == *g2);
  objects->remove(key, error);
}
