#include "dockgate/policy/image_ref.hpp"

#include <catch2/catch.hpp>

using namespace dockgate::policy;

TEST_CASE("image references normalise as the daemon's", "[image_ref]") {
  struct c {
    std::string in;
    std::string out;
  };
  const c cases[] = {
      {"busybox", "docker.io/library/busybox:latest"},
      {"busybox:1.36", "docker.io/library/busybox:1.36"},
      {"library/busybox", "docker.io/library/busybox:latest"},
      {"docker.io/busybox", "docker.io/library/busybox:latest"},
      {"index.docker.io/busybox", "docker.io/library/busybox:latest"},
      {"dockgate/test-busybox", "docker.io/dockgate/test-busybox:latest"},
      {"127.0.0.1:5000/dockgate/test-busybox:v1", "127.0.0.1:5000/dockgate/test-busybox:v1"},
      {"localhost/x", "localhost/x:latest"},
      {"ghcr.io/a/b/c", "ghcr.io/a/b/c:latest"},
      {"busybox@sha256:" + std::string(64, 'a'),
       "docker.io/library/busybox@sha256:" + std::string(64, 'a')},
      {"busybox:1@sha256:" + std::string(64, 'b'),
       "docker.io/library/busybox:1@sha256:" + std::string(64, 'b')},
      {"a__b.c-d", "docker.io/library/a__b.c-d:latest"},
  };
  for (const auto& x : cases) {
    CAPTURE(x.in);
    auto r = parse_image_reference(x.in, true);
    REQUIRE(r);
    CHECK(r->normalized() == x.out);
  }
  for (std::string_view bad : {"", "Busybox", "busybox:", "busybox:-x", "busybox@sha256:abc",
                               "a//b", "/busybox", "busybox/", "bad:port:x/y", "a...b", "a-",
                               "busybox@md5:"
                               "aaaa",
                               "UPPER/case"}) {
    CAPTURE(bad);
    CHECK_FALSE(parse_image_reference(bad, true));
  }
  auto bare = parse_image_reference("busybox", false);
  REQUIRE(bare);
  CHECK(bare->tag.empty());
}

TEST_CASE("glob patterns", "[image_ref]") {
  CHECK(glob_match("*", "anything/at:all"));
  CHECK(glob_match("docker.io/dockgate/*", "docker.io/dockgate/test-busybox:latest"));
  CHECK_FALSE(glob_match("docker.io/dockgate/*", "docker.io/library/busybox:latest"));
  CHECK(glob_match("127.0.0.1:*/dockgate/*:v*", "127.0.0.1:5000/dockgate/x:v2"));
  CHECK_FALSE(glob_match("docker.io/library/busybox:1.36", "docker.io/library/busybox:1.36.1"));
  CHECK(glob_match("a*b*c", "aXXbYYc"));
  CHECK_FALSE(glob_match("a*b*c", "aXXbYY"));
}
