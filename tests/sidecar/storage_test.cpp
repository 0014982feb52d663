#include "storage/storage.hpp"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "fleet/fleet_store.hpp"
#include "storage/storage_endpoint.hpp"

using namespace dockgate::sidecar;

namespace {
config with_dir(const std::string& dir) {
  config c;
  c.local_storage_dir = dir;
  c.storage_endpoints = {"https://minio.internal:9000"};
  return c;
}
}  // namespace

TEST_CASE("storage endpoints: the providers' public ones and the operator's list, nothing else",
          "[storage]") {
  config c;
  c.storage_endpoints = {"http://127.0.0.1:9000", "minio.corp.example", "*.objects.example"};
  for (const char* ok :
       {"https://s3.eu-west-1.amazonaws.com", "https://s3.oss-cn-hangzhou.aliyuncs.com",
        "http://127.0.0.1:9000", "https://minio.corp.example", "https://a.objects.example"}) {
    CAPTURE(ok);
    CHECK(storage_endpoint_allowed(ok, c));
  }
  for (const char* bad :
       {"http://169.254.169.254", "http://127.0.0.1:9001", "https://127.0.0.1:9000",
        "http://minio.corp.example", "https://objects.example", "http://s3.eu-west-1.amazonaws.com",
        "https://s3.evil.com#.amazonaws.com", "https://s3.amazonaws.com.evil.com",
        "https://s3.x.y.amazonaws.com:8443", "https://localhost", "http://10.0.0.1:9000"}) {
    CAPTURE(bad);
    CHECK_FALSE(storage_endpoint_allowed(bad, c));
  }
  // A storage block naming another endpoint: the seed's 400 body, with the reason.
  auto refused =
      choose_storage(R"({"provider":"s3","s3_bucket":"b","s3_endpoint":"http://169.254.169.254",)"
                     R"("s3_access_key":"AK","s3_secret_key":"SK"})",
                     c);
  CHECK_FALSE(refused.spec);
  CHECK(refused.error.value_or("").find("is not an allowed storage endpoint") != std::string::npos);
  auto region = choose_storage(
      R"({"provider":"s3","s3_bucket":"b","s3_region":"x.evil.com/","s3_access_key":"AK","s3_secret_key":"SK"})",
      c);
  CHECK_FALSE(region.spec);
}

TEST_CASE("storage endpoints: an allowed endpoint means exactly the origin written", "[storage]") {
  // A bare name or *.suffix is https on 443 only; a port must be written to be allowed;
  // `:443` written out is the same origin as none; case and a trailing root dot do not
  // make another host; userinfo, a second colon, an odd port or an IPv6 zone is no origin.
  config c;
  c.storage_endpoints = {"minio.corp.example",         "*.objects.example", "http://127.0.0.1:9000",
                         "https://store.example:8443", "http://[::1]:9000", "Minio.UPPER.example."};
  struct row {
    const char* endpoint;
    bool allowed;
  };
  const row table[] = {
      {"https://minio.corp.example", true},
      {"https://minio.corp.example:443", true},
      {"https://minio.corp.example/", true},
      {"https://MINIO.corp.example", true},
      {"https://minio.corp.example.", true},
      {"https://minio.corp.example:9000", false},  // a bare name is not every port of its host
      {"https://minio.corp.example:22", false},
      {"https://minio.corp.example.:9000", false},
      {"http://minio.corp.example", false},  // a bare name is https
      {"http://minio.corp.example:443", false},
      {"https://user@minio.corp.example", false},
      {"https://minio.corp.example@evil.example", false},
      {"https://minio.corp.example:443:80", false},
      {"https://minio.corp.example:", false},
      {"https://minio.corp.example:0", false},
      {"https://minio.corp.example:+443", false},
      {"https://minio.corp.example:65979", false},
      {"https://minio.corp.example:70000", false},
      {"https://minio..corp.example", false},
      {"https://minio.corp.example%2f", false},
      {"ftp://minio.corp.example", false},
      {"minio.corp.example", false},  // a request's endpoint names its scheme
      {"https://a.objects.example", true},
      {"https://a.b.objects.example:443", true},
      {"https://a.objects.example:8080", false},  // nor is a wildcard
      {"http://a.objects.example", false},
      {"https://objects.example", false},
      {"https://evilobjects.example", false},
      {"https://a.objects.example.evil", false},
      {"http://127.0.0.1:9000", true},
      {"http://127.0.0.1:9000/", true},
      {"http://127.0.0.1:09000", true},  // the same port (the connector reads it so too)
      {"http://127.0.0.1", false},
      {"http://127.0.0.1:9001", false},
      {"https://127.0.0.1:9000", false},
      {"https://store.example:8443", true},
      {"https://store.example", false},
      {"http://store.example:8443", false},
      {"http://[::1]:9000", true},
      {"http://[0:0:0:0:0:0:0:1]:9000", true},
      {"http://[::1]:9001", false},
      {"http://[::1]", false},
      {"http://[::1%25lo]:9000", false},
      {"http://::1:9000", false},
      {"https://minio.upper.example",
       true},  // the operator's case and root dot are not a host of their own
      {"https://minio.upper.example:8443", false},
      {"https://s3.eu-west-1.amazonaws.com:443", true},
      {"https://s3.eu-west-1.amazonaws.com:8443", false},
      {"https://s3.oss-cn-hangzhou.aliyuncs.com:9000", false},
      {"http://s3.eu-west-1.amazonaws.com:443", false},
  };
  for (const auto& r : table) {
    CAPTURE(r.endpoint);
    CHECK(storage_endpoint_allowed(r.endpoint, c) == r.allowed);
  }
  // What an operator may write; the rest is a start-up error, never an entry that means
  // something else.
  for (const char* ok :
       {"minio.corp", "minio.corp:9000", "*.objects.example", "*.objects.example:9443",
        "http://10.1.2.3:9000", "HTTPS://Minio.Corp/", "http://[fd00::1]:9000"})
    CHECK(parse_allowed_endpoint(ok));
  for (const char* bad :
       {"user@minio.corp", "minio.corp:99999", "minio.corp:", "ftp://minio.corp", "minio.corp/path",
        "*.", "*", "minio.corp:80:81", "[fe80::1%eth0]:9000", "http://"})
    CHECK_FALSE(parse_allowed_endpoint(bad));
  auto loaded = load_config(
      {{"SANDBOX_API_KEY", "k"}, {"SANDBOX_STORAGE_ENDPOINTS", "minio.corp, user@evil:9000"}});
  CHECK_FALSE(loaded.value);
  REQUIRE(loaded.errors.size() == 1);
  CHECK(loaded.errors[0].find("SANDBOX_STORAGE_ENDPOINTS: not an endpoint: \"user@evil:9000\"") ==
        0);
}

TEST_CASE("storage blocks: what the seed's app sends is understood", "[storage]") {
  const auto dir =
      std::filesystem::temp_directory_path() / ("dg-storage-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const config c = with_dir(dir.string());

  auto none = choose_storage("", config{});
  CHECK_FALSE(none.spec);
  CHECK_FALSE(none.error);
  // No block is no storage, as the seed's, even with SANDBOX_LOCAL_STORAGE_DIR set.
  auto no_block = choose_storage("", c);
  CHECK_FALSE(no_block.spec);
  CHECK_FALSE(no_block.error);
  CHECK_FALSE(choose_storage("null", c).spec);
  auto plain_local = choose_storage(R"({"provider":"local"})", c);
  REQUIRE(plain_local.spec);
  CHECK(plain_local.spec->archive_key("conv") ==
        "workspaces/workspaces/conv.tgz");  // the seed's default layout

  auto local = choose_storage(R"({"provider":"local","prefix":"tenant/"})", c);
  REQUIRE(local.spec);
  CHECK(local.spec->archive_key("k") == "tenant/workspaces/k.tgz");

  auto s3 = choose_storage(
      R"({"provider":"s3","prefix":"aivory/","s3_bucket":"data","s3_region":"eu-west-1",)"
      R"("s3_endpoint":"https://minio.internal:9000/","s3_access_key":"AK","s3_secret_key":"SK"})",
      c);
  REQUIRE(s3.spec);
  CHECK(s3.spec->s3.endpoint == "https://minio.internal:9000");
  CHECK_FALSE(s3.spec->s3.virtual_hosted);  // an explicit endpoint: path-style
  CHECK(s3.spec->s3.region == "eu-west-1");
  CHECK(s3.spec->label().find("SK") == std::string::npos);  // never a secret in a label
  CHECK(s3.spec->label().find("AK") == std::string::npos);

  auto aws = choose_storage(
      R"({"provider":"s3","s3_bucket":"data","s3_access_key":"AK","s3_secret_key":"SK"})", c);
  REQUIRE(aws.spec);
  CHECK(aws.spec->s3.endpoint == "https://s3.us-east-1.amazonaws.com");
  CHECK(aws.spec->s3.virtual_hosted);

  auto oss = choose_storage(
      R"({"provider":"aliyun_oss","prefix":"aivory/","oss_bucket":"b",)"
      R"("oss_endpoint":"https://oss-cn-hangzhou.aliyuncs.com","oss_access_key_id":"id",)"
      R"("oss_access_key_secret":"secret"})",
      c);
  REQUIRE(oss.spec);
  CHECK(oss.spec->s3.endpoint ==
        "https://s3.oss-cn-hangzhou.aliyuncs.com");  // OSS's S3-compatible endpoint
  CHECK(oss.spec->s3.region == "cn-hangzhou");
  CHECK(oss.spec->s3.virtual_hosted);  // OSS takes only virtual-hosted requests

  // A label brings back the place, not the credentials.
  auto back = storage_from_label(s3.spec->label(), c);
  REQUIRE(back);
  CHECK(back->same_place(*s3.spec));
  CHECK_FALSE(back->has_credentials);
  CHECK(back->s3.secret_key.empty());
  CHECK_FALSE(storage_from_label(R"({"provider":"s3","base":"../x"})", c));
  std::filesystem::remove_all(dir);
}

TEST_CASE("storage blocks the sidecar cannot use are refused with the reason", "[storage]") {
  const auto dir =
      std::filesystem::temp_directory_path() / ("dg-storage2-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const config c = with_dir(dir.string());
  const std::pair<const char*, const char*> cases[] = {
      {R"({"provider":"local","prefix":"../up"})", "invalid storage prefix"},
      {R"({"provider":"local","prefix":"a/../../b"})", "invalid storage prefix"},
      {R"({"provider":"local","prefix":"a b"})", "invalid storage prefix"},
      {R"({"provider":"local","prefix":"a//b"})", "invalid storage prefix"},
      {R"({"provider":"local","prefix":7})", "storage.prefix must be a string"},
      {R"({"provider":"gcs"})", "unsupported storage provider: gcs"},
      {R"({"prefix":"x/"})", "unsupported storage provider: "},
      {R"({"provider":"s3","s3_access_key":"a","s3_secret_key":"b"})",
       "storage.s3_bucket is required"},
      {R"({"provider":"s3","s3_bucket":"b"})",
       "storage.s3_access_key and storage.s3_secret_key are required"},
      {R"({"provider":"s3","s3_bucket":"a/b","s3_access_key":"a","s3_secret_key":"b"})",
       "invalid storage.s3_bucket"},
      {R"({"provider":"s3","s3_bucket":"b","s3_endpoint":"minio:9000","s3_access_key":"a","s3_secret_key":"b"})",
       "invalid storage.s3_endpoint"},
      {R"({"provider":"aliyun_oss","oss_bucket":"b"})", "storage.oss_bucket, oss_endpoint"},
      {R"([1])", "storage must be an object"},
  };
  for (const auto& [json, reason] : cases) {
    CAPTURE(json);
    auto choice = choose_storage(json, c);
    CHECK_FALSE(choice.spec);
    REQUIRE(choice.error);
    CHECK_THAT(*choice.error, Catch::StartsWith(reason));
  }
  // Local storage without the operator's directory cannot be used.
  auto unconfigured = choose_storage(R"({"provider":"local"})", config{});
  REQUIRE(unconfigured.error);
  CHECK(*unconfigured.error == "storage backend not configured");
  std::filesystem::remove_all(dir);
}

TEST_CASE("the local object store: atomic, generations, copies, listings, contained keys",
          "[storage]") {
  const auto dir =
      std::filesystem::temp_directory_path() / ("dg-store-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const config c = with_dir(dir.string());
  auto spec = choose_storage(R"({"provider":"local"})", c).spec;
  REQUIRE(spec);
  auto store = open_store(*spec, c);
  std::string error;
  const std::string key = spec->archive_key("k");
  CHECK(store->get(key, 100).what == stored_object::state::missing);
  CHECK(store->generation(key, error) == std::string());
  auto g1 = store->put(key, "one", "application/gzip", error);
  REQUIRE(g1);
  auto g2 = store->put(key, "two", "application/gzip", error);
  REQUIRE(g2);
  CHECK(*g1 != *g2);  // every write is a new generation
  CHECK(store->generation(key, error) == *g2);
  auto got = store->get(key, 100);
  CHECK(got.data == "two");
  CHECK(got.generation == *g2);
  CHECK(store->get(key, 2).what == stored_object::state::error);  // larger than asked for
  REQUIRE(store->copy(key, "workspaces/workspaces/k.prev.tgz", error));
  CHECK(store->get("workspaces/workspaces/k.prev.tgz", 100).data == "two");
  std::vector<object_entry> listed;
  REQUIRE(store->list("workspaces/workspaces/k.prev", listed, error));
  CHECK(listed.size() == 1);
  listed.clear();
  REQUIRE(store->list("workspaces/", listed, error));
  CHECK(listed.size() == 2);
  CHECK(listed[0].last_modified > 0);
  CHECK_FALSE(store->put("../escape", "x", {}, error));
  CHECK_FALSE(store->put("/abs", "x", {}, error));
  CHECK_FALSE(store->put("a/./b", "x", {}, error));
  CHECK(error == "invalid storage key");
  CHECK(store->remove(key, error));
  CHECK(store->remove(key, error));  // missing is fine
  CHECK_FALSE(store->presign_get("x", 60, 0));
  // What a killed sidecar left behind goes once it is old; a write in progress stays.
  std::filesystem::create_directories(dir / "workspaces/workspaces");
  std::ofstream(dir / "workspaces/workspaces/k.tgz.tmp-1-1") << "partial";
  std::ofstream(dir / "workspaces/workspaces/k.tgz.tmp-2-2") << "in progress";
  std::filesystem::last_write_time(
      dir / "workspaces/workspaces/k.tgz.tmp-1-1",
      std::filesystem::file_time_type::clock::now() - std::chrono::hours(2));
  CHECK(remove_stale_temporaries(dir.string(), 3600) == 1);
  CHECK(std::filesystem::exists(dir / "workspaces/workspaces/k.tgz.tmp-2-2"));
  CHECK(valid_object_key("uploads/a b.png"));
  CHECK_FALSE(valid_object_key(std::string("a\0b", 3)));
  CHECK_FALSE(valid_object_key("a/../b"));
  CHECK_FALSE(valid_object_key("a\\b"));
  std::filesystem::remove_all(dir);
}

// The fleet's records name a workspace generation (fleet_store.hpp): only "" or g.<16 hex>
// is read from the store, so that a record cannot point a mount at another key's files or
// outside the prefix.
TEST_CASE(
    "fleet records: a workspace generation is empty or g.<16 hex digits>, and none is inside "
    "another's prefix",
    "[sidecar][fleet]") {
  session_record r;
  r.session_id = "0123456789abcdef0123456789abcdef";
  r.archive_key = "conv-1";
  r.owner = "sbx-a";
  r.generation = "g.0123456789abcdef";
  r.copy_from = "";
  auto back = session_record::parse(r.to_json());
  REQUIRE(back);
  CHECK(back->generation == "g.0123456789abcdef");
  REQUIRE(back->copy_from);
  CHECK(back->copy_from->empty());
  r.copy_from.reset();
  back = session_record::parse(r.to_json());
  REQUIRE(back);
  CHECK_FALSE(back->copy_from);
  for (const char* bad : {"../other", "other-key", "g.0123", "g.0123456789ABCDEF",
                          "g.0123456789abcdef/x", "g/0123456789abcdef"}) {
    INFO(bad);
    r.generation = bad;
    CHECK_FALSE(session_record::parse(r.to_json()));
    r.generation = "";
    r.copy_from = bad;
    CHECK_FALSE(session_record::parse(r.to_json()));
    r.copy_from.reset();
    CHECK_FALSE(workspace_record::parse(R"({"archive_key":"conv-1","generation":")" +
                                        std::string(bad) + "\"}"));
  }
  CHECK(workspace_record::parse(R"({"archive_key":"conv-1","generation":"g.0123456789abcdef"})"));
  // A generation's key: the archive key under g.<hex>/ (a name with a dot, which no archive
  // key has: never inside <key>/, nor another key's prefix).
  CHECK(fleet_store::workspace_key("conv-1", "") == "conv-1");
  CHECK(fleet_store::workspace_key("conv-1", "g.0123456789abcdef") == "g.0123456789abcdef/conv-1");
  const auto one = fleet_store::new_generation(), two = fleet_store::new_generation();
  CHECK(one != two);
  r.generation = one;
  CHECK(session_record::parse(r.to_json()));
}
