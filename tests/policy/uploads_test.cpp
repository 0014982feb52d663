// The upload rule (body_rules.hpp, upload_rule; upload_archive.hpp): its policy-file key,
// the anonymous volumes at create, v=1 on delete, and the checks over an archive's entries.
#include <catch2/catch.hpp>

#include "dockgate/policy/body_review.hpp"
#include "dockgate/policy/query.hpp"
#include "dockgate/policy/upload_archive.hpp"

using namespace dockgate::policy;
namespace http = dockgate::http;

namespace {

const policy& sandbox() {
  static const policy p = *parse_policy(R"({"profiles":{"box":{
      "allow":["ContainerCreate","ContainerDelete","PutContainerArchive"],
      "images":{"allow":["docker.io/library/busybox:*"]},
      "container_create":{"HostConfig.ReadonlyRootfs":{"force":true}},
      "volumes":{"mount_owned":true},
      "uploads":{"targets":["/opt/opensandbox","/srv/app"],"max_bytes":1000}}}})")
                               .value;
  return p;
}
const profile& box() {
  return sandbox().default_();
}

std::vector<std::string> load_errors(std::string_view uploads) {
  return parse_policy(R"({"profiles":{"p":{"allow":[],"uploads":)" + std::string(uploads) + "}}}")
      .errors;
}

upload_entry file(std::string name, std::uint64_t size = 10) {
  return {std::move(name), upload_entry::kind::file, false, size};
}
upload_entry dir(std::string name) {
  return {std::move(name), upload_entry::kind::directory};
}

// "path name1 name2 ..." ("-" for an entry left out), or "<status> <reason>".
std::string plan(std::string_view path, std::vector<upload_entry> entries) {
  auto d = review_upload(box(), path, entries);
  if (auto* x = std::get_if<deny>(&d)) return std::to_string(x->status) + " " + x->reason;
  const auto& p = std::get<upload_plan>(d);
  std::string out = p.path;
  for (const auto& n : p.names) out += " " + n.value_or("-");
  return out;
}

std::string query_of(http::method m, std::string_view target) {
  auto r = std::get<route>(route_request(m, target));
  auto q = review_query(box(), r);
  if (auto* x = std::get_if<deny>(&q)) return std::to_string(x->status) + " " + x->reason;
  return std::get<query_review>(q).query;
}

const std::string image = R"("Image":"busybox:1")";

}  // namespace

TEST_CASE("uploads: the policy-file key is strict", "[uploads]") {
  CHECK(box().rules.uploads->targets == std::vector<std::string>{"/opt/opensandbox", "/srv/app"});
  CHECK(box().rules.uploads->max_bytes == 1000);
  auto defaults = parse_policy(R"({"profiles":{"p":{"allow":[],"uploads":{"targets":["/a"]}}}})");
  REQUIRE(defaults.value);
  CHECK(defaults.value->default_().rules.uploads->max_bytes == 256u << 20);
  CHECK(load_errors(R"({"targets":["/a"]})").empty());
  CHECK(load_errors(R"({"targets":["/"]})").size() == 1);
  CHECK(load_errors(R"({"targets":["/a/../b"]})").size() == 1);
  CHECK(load_errors(R"({"targets":["a"]})").size() == 1);
  CHECK(load_errors(R"({"targets":["/a","/a/b"]})").size() == 1);
  CHECK(load_errors(R"({"targets":[]})").size() == 1);
  CHECK(load_errors(R"({"max_bytes":5})").size() == 1);
  CHECK(load_errors(R"({"targets":["/a"],"max_bytes":0})").size() == 1);
  CHECK(load_errors(R"({"targets":["/a"],"max_bytes":"1"})").size() == 1);
  CHECK(load_errors(R"({"targets":["/a"],"bogus":1})").size() == 1);
  CHECK(load_errors(R"(["/a"])").size() == 1);
}

TEST_CASE("uploads: each target gets an owned anonymous volume at create, idempotently",
          "[uploads]") {
  auto d = review_container_create(box(), "{" + image + "}");
  REQUIRE(std::holds_alternative<rewrite>(d));
  const auto& rw = std::get<rewrite>(d);
  const std::string volume =
      R"({"Type":"volume","Target":"/opt/opensandbox","VolumeOptions":{"Labels":{"dockgate.owner":"box"}}})";
  CHECK(rw.body.find(R"("Mounts":[)" + volume + R"(,{"Type":"volume","Target":"/srv/app",)") !=
        std::string::npos);
  REQUIRE(std::any_of(rw.changes.begin(), rw.changes.end(), [](const body_change& c) {
    return c.field == "HostConfig.Mounts" && c.action == "upload volume";
  }));
  // The gate's own output reviewed again: the same body, and no change of the mounts.
  auto again = review_container_create(box(), rw.body);
  REQUIRE(std::holds_alternative<rewrite>(again));
  CHECK(std::get<rewrite>(again).body == rw.body);
  for (const auto& c : std::get<rewrite>(again).changes) CHECK(c.field != "HostConfig.Mounts");
  // A client's own volume with the owner's label is not the gate's: refused as before.
  auto forged = review_container_create(
      box(), "{" + image + R"(,"HostConfig":{"Mounts":[{"Type":"volume","Target":"/x",)" +
                 R"("VolumeOptions":{"Labels":{"dockgate.owner":"box"}}}]}})");
  CHECK(std::holds_alternative<deny>(forged));
}

TEST_CASE("uploads: a target the body already mounts gets no second mount", "[uploads]") {
  auto d =
      review_container_create(box(), "{" + image + R"(,"HostConfig":{"Binds":["data:/srv/app"]}})");
  REQUIRE(std::holds_alternative<rewrite>(d));
  const auto& body = std::get<rewrite>(d).body;
  CHECK(body.find(R"("Target":"/opt/opensandbox")") != std::string::npos);
  CHECK(body.find(R"("Target":"/srv/app")") == std::string::npos);
}

TEST_CASE("uploads: a delete takes the container's anonymous volumes with it", "[uploads]") {
  CHECK(query_of(http::method::delete_, "/v1.41/containers/x?force=1") == "force=1&v=1");
  CHECK(query_of(http::method::delete_, "/v1.41/containers/x?v=0&force=1") == "force=1&v=1");
  CHECK(query_of(http::method::delete_, "/v1.41/containers/x?v=true") == "v=true");
  auto r = std::get<route>(route_request(http::method::delete_, "/v1.41/containers/x?v=false"));
  auto q = std::get<query_review>(review_query(box(), r));
  REQUIRE(q.changes.size() == 1);
  CHECK(q.changes[0] == body_change{"query:v", "upload volumes removed", "\"false\"", "\"1\""});
  // The client's value, escaped: whitespace around a false value is still false.
  r = std::get<route>(route_request(http::method::delete_, "/v1.41/containers/x?v=%0A0%22"));
  q = std::get<query_review>(review_query(box(), r));
  CHECK(q.changes.empty());  // `0"` is true to dockerd: v stays as sent
  r = std::get<route>(route_request(http::method::delete_, "/v1.41/containers/x?v=%0A0%09"));
  q = std::get<query_review>(review_query(box(), r));
  REQUIRE(q.changes.size() == 1);
  CHECK(q.changes[0].from == "\"\\n0\\t\"");
}

TEST_CASE("uploads: the query path is a target's or on the way to one", "[uploads]") {
  CHECK(query_of(http::method::put, "/v1.41/containers/x/archive?path=/") == "path=/");
  CHECK(query_of(http::method::put, "/v1.41/containers/x/archive?path=/opt") == "path=/opt");
  CHECK(query_of(http::method::put, "/v1.41/containers/x/archive?path=/opt/opensandbox/a") ==
        "path=/opt/opensandbox/a");
  CHECK(query_of(http::method::put, "/v1.41/containers/x/archive?path=/etc").starts_with("403 "));
  CHECK(query_of(http::method::put, "/v1.41/containers/x/archive?path=/opt/opensandboxx")
            .starts_with("403 "));
  CHECK(query_of(http::method::put, "/v1.41/containers/x/archive?path=/opt/../etc")
            .starts_with("403 "));
  // The docker CLI writes a directory with a trailing "/".
  CHECK(query_of(http::method::put, "/v1.41/containers/x/archive?path=/opt/opensandbox/") ==
        "path=/opt/opensandbox/");
  CHECK(query_of(http::method::put, "/v1.41/containers/x/archive?path=/opt/opensandbox//")
            .starts_with("403 "));
  CHECK(query_of(http::method::put, "/v1.41/containers/x/archive?path=/etc/").starts_with("403 "));
  CHECK(query_of(http::method::put, "/v1.41/containers/x/archive").starts_with("403 "));
  CHECK(query_of(http::method::put, "/v1.41/containers/x/archive?path=/etc") ==
        "403 dockgate: PutContainerArchive path \"/etc\" is not within an upload target "
        "(profile box, rule uploads)");
}

TEST_CASE("uploads: entry names are relative and clean", "[uploads]") {
  CHECK(clean_entry_name("a/b") == "a/b");
  CHECK(clean_entry_name("./a/b") == "a/b");
  CHECK(clean_entry_name("././a") == "a");
  CHECK(clean_entry_name("a/") == "a");
  CHECK(clean_entry_name("./") == "");
  CHECK(clean_entry_name(".") == "");
  CHECK_FALSE(clean_entry_name("/a"));
  CHECK_FALSE(clean_entry_name("/"));
  CHECK_FALSE(clean_entry_name("../a"));
  CHECK_FALSE(clean_entry_name("a/../../b"));
  CHECK_FALSE(clean_entry_name("a/.."));
  CHECK_FALSE(clean_entry_name("a//b"));
  CHECK_FALSE(clean_entry_name("a/./b"));
  CHECK_FALSE(clean_entry_name("a//"));
  CHECK_FALSE(clean_entry_name(""));
  CHECK_FALSE(clean_entry_name(std::string(5000, 'a')));
  CHECK(upload_mode(04755) == 0755);
  CHECK(upload_mode(01777) == 0777);
}

TEST_CASE("uploads: only regular files and directories, within one target", "[uploads]") {
  // OpenSandbox's four writes.
  CHECK(plan("/", {dir("opt/opensandbox")}) == "/opt/opensandbox -");
  CHECK(plan("/opt/opensandbox", {file("execd")}) == "/opt/opensandbox execd");
  CHECK(plan("/opt/opensandbox/", {file("execd")}) == "/opt/opensandbox execd");
  CHECK(plan("/opt/", {file("opensandbox/execd")}) == "/opt/opensandbox execd");
  CHECK(plan("/", {dir("opt/"), dir("opt/opensandbox/"), file("opt/opensandbox/bootstrap.sh")}) ==
        "/opt/opensandbox - - bootstrap.sh");
  CHECK(plan("/opt", {file("./opensandbox/a"), dir("opensandbox/d"), file("opensandbox/d/b")}) ==
        "/opt/opensandbox a d d/b");
  CHECK(plan("/srv/app/sub", {dir("./"), file("x")}) == "/srv/app/sub - x");
  CHECK(plan("/", {}) == "/opt/opensandbox");
  auto refused = [](std::string_view path, std::vector<upload_entry> e) {
    return plan(path, std::move(e)).starts_with("403 ");
  };
  CHECK(refused("/", {dir("opt/opensandbox"), file("etc/passwd")}));
  CHECK(refused("/", {file("opt/opensandbox/a"), file("srv/app/b")}));  // two targets at once
  CHECK(refused("/", {file("opt/x")}));                                 // a file beside a target
  CHECK(refused("/", {file("opt")}));              // a file on the way to a target
  CHECK(refused("/", {file("opt/opensandbox")}));  // a file in place of the target
  CHECK(refused("/", {dir("opt/other")}));         // a directory beside it
  CHECK(refused("/opt/opensandbox", {file("../x")}));
  CHECK(refused("/opt/opensandbox", {file("/etc/x")}));
  CHECK(refused("/opt/opensandbox", {file("./")}));  // a file naming the path itself
  CHECK(refused("/opt/opensandbox", {{"l", upload_entry::kind::symlink}}));
  CHECK(refused("/opt/opensandbox", {{"h", upload_entry::kind::hardlink}}));
  CHECK(refused("/opt/opensandbox", {{"f", upload_entry::kind::other}}));
  CHECK(refused("/opt/opensandbox", {{"s", upload_entry::kind::file, true, 1}}));
  CHECK(refused("/etc", {file("x")}));
  CHECK(plan("/opt/opensandbox", {{"l", upload_entry::kind::symlink}}) ==
        "403 dockgate: PutContainerArchive entry \"l\" is a symbolic link: only regular files and "
        "directories are uploaded (profile box, rule uploads)");
}

TEST_CASE("uploads: the content is capped at max_bytes", "[uploads]") {
  CHECK(plan("/opt/opensandbox", {file("a", 600), file("b", 400)}) == "/opt/opensandbox a b");
  CHECK(plan("/opt/opensandbox", {file("a", 600), file("b", 401)}).starts_with("413 "));
}

TEST_CASE("uploads: the path is replaced in the query, the rest kept", "[uploads]") {
  CHECK(with_upload_path("path=%2F&noOverwriteDirNonDir=1", "/opt/x") ==
        "noOverwriteDirNonDir=1&path=%2Fopt%2Fx");
  CHECK(with_upload_path("path=/", "/a") == "path=%2Fa");
}
