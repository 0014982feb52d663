// dockgate-sidecar's /files paths answer what the seed's sidecar answers (docs/aivory-api.md,
// "Files": normpath, then `realpath -m` checked under /workspace, then `test -f`),
// judged by the status and the bytes the client receives. Where the seed would follow a
// symlink that stays inside the workspace, dockgate refuses it (it never follows one).
#include "sidecar_harness.hpp"

using namespace dockgate::test;

namespace {

struct answer {
  unsigned status;
  std::string body;
};

}  // namespace

TEST_CASE("files: directories, symlinks, FIFOs and missing parents answer as the seed's",
          "[integration][sidecar][files][userns]") {
  proxy_process proxy("compose/policies/sandbox.json");
  sidecar_process sidecar(proxy);
  const std::string sid = new_session(sidecar);
  auto setup = sidecar.call("POST", "/exec",
                            exec_body(sid, R"(import os, socket
os.makedirs('/workspace/d/sub')
open('/workspace/d/real.txt', 'w').write('real')
os.symlink('/workspace/d', '/workspace/dir-link')
os.symlink('/workspace/d/real.txt', '/workspace/inside-link')
os.symlink('/workspace/nothing-here', '/workspace/dangling')
os.symlink('/etc', '/workspace/etc-link')
os.symlink('/etc/passwd', '/workspace/passwd')
os.mkfifo('/workspace/fifo')
socket.socket(socket.AF_UNIX).bind('/workspace/sock')
print('ready')
)",
                                      10000));
  REQUIRE(field(setup.body, "stdout") == "ready\n");
  const std::string not_found = R"({"detail":"file not found"})";
  const std::string outside = R"({"detail":"path resolves outside /workspace"})";
  const std::string through_link = R"({"detail":"path resolves through a symlink"})";

  // /files/get: the seed's `test -f` answers 404 for anything inside that is not a
  // regular file, a directory included; 400 only for what resolves outside.
  const std::pair<const char*, answer> reads[] = {
      {"d/real.txt", {200, R"({"data_base64":"cmVhbA=="})"}},
      {"d", {404, not_found}},
      {"d/", {404, not_found}},
      {"/workspace/d/sub", {404, not_found}},
      {"outputs", {404, not_found}},
      {"dir-link", {404, not_found}},       // a symlink to a directory inside
      {"dir-link/sub", {404, not_found}},   // through it, to a directory
      {"dangling", {404, not_found}},       // a symlink to nothing, inside
      {"d/real.txt/x", {404, not_found}},   // a parent that is a file
      {"missing/x.txt", {404, not_found}},  // a parent that does not exist
      {"fifo", {404, not_found}},
      {"sock", {404, not_found}},
      {"etc-link", {400, outside}},
      {"etc-link/hostname", {400, outside}},
      {"passwd", {400, outside}},
      {"inside-link", {400, through_link}},  // the seed would follow it; dockgate never does
      {"dir-link/real.txt", {400, through_link}},
  };
  for (const auto& [path, expected] : reads) {
    CAPTURE(path);
    auto got = sidecar.call("POST", "/files/get",
                            R"({"session_id":")" + sid + R"(","path":")" + path + R"("})");
    CHECK(got.status == expected.status);
    CHECK(got.body == expected.body);
  }

  // /files: a directory is not a file to write; a parent that is a file fails as the
  // seed's `mkdir -p`; symlinks as for reads.
  const std::pair<const char*, answer> writes[] = {
      {"d", {400, R"({"detail":"not a regular file"})"}},
      {"fifo", {400, R"({"detail":"not a regular file"})"}},
      {"d/real.txt/x",
       {500,
        R"({"detail":"mkdir failed: a parent of /workspace/d/real.txt/x is not a directory"})"}},
      {"etc-link/x", {400, outside}},
      {"passwd", {400, outside}},
      {"dir-link/new.txt", {400, through_link}},
      {"inside-link", {400, through_link}},
      {"new/dir/a.txt", {200, R"({"ok":true})"}},
  };
  for (const auto& [path, expected] : writes) {
    CAPTURE(path);
    auto got = sidecar.call(
        "POST", "/files",
        R"({"session_id":")" + sid + R"(","path":")" + path + R"(","data_base64":"aGk="})");
    CHECK(got.status == expected.status);
    CHECK(got.body == expected.body);
  }
  // Nothing was written through a link or over the file.
  auto listed = sidecar.exec(
      sid,
      "import os\n"
      "print(open('/workspace/d/real.txt').read(), sorted(os.listdir('/workspace/d')))");
  CHECK(field(listed, "stdout") == "real ['real.txt', 'sub']\n");
  CHECK(sidecar.call("DELETE", "/sessions/" + sid, "").status == 200);
}
