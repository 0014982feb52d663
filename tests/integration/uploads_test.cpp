// Upload by archive under a read-only root (docs/policy.md, "uploads"): OpenSandbox's four
// writes of execd through the gate into a container whose root is read-only, the writes
// the gate refuses, and the volume that goes with the container. Judged by the daemon:
// what the container holds when it runs, its mounts, the volume's labels and existence.
#include <catch2/catch.hpp>
#include <fstream>

#include "harness.hpp"

using namespace dockgate::test;

namespace {

std::string direct() {
  return docker_cli() + " -H " + engine_host();
}
std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  return s;
}

const std::string upload_policy = R"({"profiles":{"up":{
  "allow":["SystemPing","ContainerCreate","ContainerStart","ContainerInspect","ContainerDelete",
           "PutContainerArchive","ContainerArchiveInfo","ImageInspect"],
  "images":{"allow":["*"]},
  "container_create":{"HostConfig.ReadonlyRootfs":{"force":true}},
  "uploads":{"targets":["/opt/app"],"max_bytes":65536}}},
  "default_profile":"up"})";

// The archives, made with Python's tarfile (what a client may send, good and bad).
const std::string make_tars = R"PY(
import io, os, sys, tarfile
d = sys.argv[1]
def tar(name, entries, mode="w"):
    with tarfile.open(os.path.join(d, name), mode) as t:
        for e in entries:
            t.addfile(*e)
def f(name, data, mode=0o644):
    i = tarfile.TarInfo(name); i.size = len(data); i.mode = mode
    return (i, io.BytesIO(data))
def dirent(name):
    i = tarfile.TarInfo(name); i.type = tarfile.DIRTYPE; i.mode = 0o755
    return (i,)
def link(name, target, kind):
    i = tarfile.TarInfo(name); i.type = kind; i.linkname = target
    return (i,)
tar("dir.tar", [dirent("opt/app")])
tar("deep.tar", [dirent("opt"), dirent("opt/app"), dirent("opt/app/lib"), f("opt/app/lib/x", b"x")])
tar("execd.tar.gz", [f("execd", b"EXECD-OK\n", 0o4755)], "w:gz")
tar("boot.tar", [f("./bootstrap.sh", b"BOOT-OK\n", 0o755)])
tar("symlink.tar", [link("link", "/etc/passwd", tarfile.SYMTYPE)])
tar("dotdot.tar", [f("../escape", b"x")])
tar("hardlink.tar", [f("a", b"x"), link("b", "a", tarfile.LNKTYPE)])
tar("plain.tar", [f("x", b"x")])
tar("parent.tar", [dirent("opt/app"), f("opt/app/ok", b"x"), f("etc/evil", b"x")])
tar("big.tar", [f("big", b"b" * 70000)])
open(os.path.join(d, "zeros.tar"), "wb").write(bytes(2 * 65536 + 1048576 + 1))
open(os.path.join(d, "junk.tar"), "wb").write(b"not a tar archive" * 64)
# A good entry, then a damaged header where the next entry or the end should be.
tar("one.tar", [f("one", b"1")])
open(os.path.join(d, "damaged.tar"), "wb").write(open(os.path.join(d, "one.tar"), "rb").read()[:1024] + b"junk" * 128)
)PY";

// A PUT of `file` as the container's archive at `path` on `socket`: the HTTP status (with
// `answer`: the status and the body; `chunked`: the body in chunks).
std::string put(const std::string& socket, const std::string& container, const std::string& path,
                const std::string& file, bool answer = false, bool chunked = false) {
  return run("curl -s " + std::string(answer ? "" : "-o /dev/null ") +
             "-w '%{http_code}' --unix-socket " + socket +
             " -X PUT -H 'Content-Type: application/x-tar' " +
             (chunked ? "-H 'Transfer-Encoding: chunked' " : "") + "--data-binary @" + file +
             " 'http://d/v1.41/containers/" + container + "/archive?path=" + path + "'")
      .output;
}

struct cleanup {
  std::vector<std::string> names;
  ~cleanup() {
    for (const auto& n : names) run(direct() + " rm -f -v " + n + " >/dev/null 2>&1");
  }
};

}  // namespace

TEST_CASE("uploads: execd written into a read-only root through the gate, nothing else",
          "[integration][uploads]") {
  proxy_process proxy(upload_policy);
  const std::string dir = proxy.dir();
  REQUIRE(run("python3 -c '" + make_tars + "' " + dir).status == 0);
  const auto name = unique_name("dg-upload");
  const auto foreign = unique_name("dg-upload-foreign");
  cleanup c{{name, foreign}};
  // Created as OpenSandbox's server creates its sandbox: a plain Engine API body.
  std::ofstream(dir + "/create.json")
      << R"({"Image":")" << test_image()
      << R"(","Cmd":["sh","-c","cat /opt/app/execd /opt/app/bootstrap.sh; ls -A /opt/app /opt; cat /opt/app/lib/x; echo; )"
      << R"(stat -c %a /opt/app/execd; ls /etc/evil /etc/x 2>&1 | wc -l"]})";
  const auto created = run("curl -s --unix-socket " + proxy.socket_path() +
                           " -H 'Content-Type: application/json' --data-binary @" + dir +
                           "/create.json 'http://d/v1.41/containers/create?name=" + name + "'");
  INFO(created.output);
  REQUIRE(created.output.starts_with("{\"Id\""));

  // The daemon made an anonymous volume at the target, labelled with the owner.
  CHECK(trim(run(direct() + " inspect -f '{{.HostConfig.ReadonlyRootfs}}' " + name).output) ==
        "true");
  const std::string volume =
      trim(run(direct() +
               " inspect -f '{{range .Mounts}}{{if eq .Destination \"/opt/app\"}}"
               "{{.Name}}{{end}}{{end}}' " +
               name)
               .output);
  REQUIRE(volume.size() == 64);
  CHECK(trim(run(direct() + " volume inspect -f '{{index .Labels \"dockgate.owner\"}}' " + volume)
                 .output) == "up");

  // OpenSandbox's four writes: a directory at /, execd (gzip), / again, bootstrap.sh.
  const std::string gate = proxy.socket_path();
  CHECK(put(gate, name, "/", dir + "/dir.tar") == "200");
  CHECK(put(gate, name, "/opt/app", dir + "/execd.tar.gz") == "200");
  CHECK(put(gate, name, "/", dir + "/dir.tar") == "200");
  CHECK(put(gate, name, "/opt/app", dir + "/boot.tar") == "200");
  // A write at / whose entries lie in the target goes into it (the volume's root).
  CHECK(put(gate, name, "/", dir + "/deep.tar") == "200");
  CHECK(proxy.audit_contains("upload into target"));

  // The docker CLI's `docker cp` (a trailing "/" on the directory): a file in, a link not.
  REQUIRE(run("echo top > " + dir + "/one.txt && ln -s /etc/passwd " + dir + "/lnk").status == 0);
  CHECK(run(proxy.docker() + " cp " + dir + "/one.txt " + name + ":/opt/app/").status == 0);
  CHECK(run(proxy.docker() + " cp " + dir + "/lnk " + name + ":/opt/app/").status != 0);

  // Refused, and nothing of them reaches the container.
  CHECK(put(gate, name, "/opt/app", dir + "/symlink.tar") == "403");
  CHECK(put(gate, name, "/opt/app", dir + "/dotdot.tar") == "403");
  CHECK(put(gate, name, "/opt/app", dir + "/hardlink.tar", true).find("is a hard link") !=
        std::string::npos);
  CHECK(put(gate, name, "/etc", dir + "/plain.tar") == "403");
  CHECK(put(gate, name, "/", dir + "/parent.tar") == "403");
  CHECK(put(gate, name, "/opt/app", dir + "/big.tar") == "413");
  CHECK(put(gate, name, "/opt/app", dir + "/zeros.tar") == "413");  // an empty tar, too long
  CHECK(put(gate, name, "/opt/app", dir + "/zeros.tar", false, true) == "413");
  // A length over the cap is answered at once, before any of the body is read.
  CHECK(raw_exchange(gate, "PUT /v1.41/containers/" + name +
                               "/archive?path=/opt/app HTTP/1.1\r\nHost: d\r\n"
                               "Content-Type: application/x-tar\r\nContent-Length: 1000000000"
                               "\r\n\r\n")
            .status() == 413);
  CHECK(put(gate, name, "/opt/app", dir + "/junk.tar") == "400");
  CHECK(put(gate, name, "/opt/app", dir + "/damaged.tar") == "400");
  // A container the profile does not own (made on the daemon directly).
  REQUIRE(run(direct() + " create --name " + foreign + " --read-only -v /opt/app " + test_image() +
              " true")
              .status == 0);
  CHECK(put(gate, foreign, "/opt/app", dir + "/plain.tar") == "404");
  CHECK(run("curl -s -o /dev/null -w '%{http_code}' --unix-socket " + engine_socket() +
            " 'http://d/v1.41/containers/" + foreign + "/archive?path=/opt/app/x'")
            .output == "404");

  // What the container holds: execd (setuid dropped) and bootstrap.sh, nothing refused.
  CHECK(
      run(direct() + " start -a " + name).output ==
      "EXECD-OK\nBOOT-OK\n/opt:\napp\n\n/opt/app:\nbootstrap.sh\nexecd\nlib\none.txt\nx\n755\n2\n");

  // Removed through the gate without v: the anonymous volume goes with it.
  CHECK(run(proxy.docker() + " rm " + name).status == 0);
  CHECK(run(direct() + " volume inspect " + volume + " >/dev/null 2>&1").status != 0);
}
