// The files the gate trusts are read only when root controls the whole way to them;
// symlinks are followed as the kernel follows them, each one judged by the same rule.
#include "dockgate/common/host_path.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

using dockgate::common::read_root_controlled_file;

TEST_CASE("root-controlled files: symlinks followed and judged, a user's file or directory refused",
          "[common][host_path][trust]") {
  namespace fs = std::filesystem;
  const fs::path base = fs::temp_directory_path() / ("dg-trust-" + std::to_string(::getpid()));
  fs::remove_all(base);
  fs::create_directories(base / "etc/dockgate");
  fs::create_directories(base / "other");
  for (const auto& d : {base, base / "etc", base / "etc/dockgate", base / "other"})
    ::chmod(d.c_str(), 0755);
  std::ofstream(base / "etc/dockgate/p.json") << "{}";
  ::chmod((base / "etc/dockgate/p.json").c_str(), 0644);
  auto read = [](const fs::path& p) { return read_root_controlled_file(p.string()); };

  CHECK(read(base / "etc/dockgate/p.json").bytes == "{}");
  // Relative symlinks with `..`, chains, and absolute ones: the kernel's reading.
  fs::create_symlink("../etc/dockgate/p.json", base / "other/rel");
  fs::create_symlink(base / "other/rel", base / "other/abs");
  fs::create_directory_symlink("../etc", base / "other/etc");
  CHECK(read(base / "other/rel").bytes == "{}");
  CHECK(read(base / "other/abs").bytes == "{}");
  CHECK(read(base / "other/etc/dockgate/../dockgate/p.json").bytes == "{}");
  // A loop ends.
  fs::create_symlink("loop-b", base / "other/loop-a");
  fs::create_symlink("loop-a", base / "other/loop-b");
  CHECK_THAT(read(base / "other/loop-a").error, Catch::Contains("too many symlinks"));
  // Not a regular file: a directory, a FIFO (never opened for reading: no hang).
  CHECK_THAT(read(base / "etc/dockgate").error, Catch::Contains("is a directory"));
  REQUIRE(::mkfifo((base / "other/fifo").c_str(), 0644) == 0);
  CHECK_THAT(read(base / "other/fifo").error, Catch::Contains("is not a regular file"));
  CHECK_THAT(read(base / "etc/dockgate/p.json/x").error, Catch::Contains("is not a directory"));
  CHECK_THAT(read_root_controlled_file((base / "etc/dockgate/p.json").string(), 1).error,
             Catch::Contains("larger than 1 bytes"));
  // Writable by others: the file, or a directory on the way (also one a symlink leads through).
  ::chmod((base / "etc/dockgate/p.json").c_str(), 0664);
  CHECK_THAT(read(base / "etc/dockgate/p.json").error,
             Catch::Contains("writable by group or others (mode 0664)"));
  ::chmod((base / "etc/dockgate/p.json").c_str(), 0644);
  ::chmod((base / "etc").c_str(), 0777);
  CHECK_THAT(read(base / "other/rel").error,
             Catch::Contains("its directory \"" + (base / "etc").string() + "\" is writable"));
  ::chmod((base / "etc").c_str(), 0755);
  if (::geteuid() == 0) {
    // Another user's: the file, the directory a symlink leads into, a symlink in a sticky
    // directory.
    REQUIRE(::chown((base / "etc/dockgate/p.json").c_str(), 4242, 4242) == 0);
    CHECK_THAT(read(base / "other/abs").error, Catch::Contains("is owned by uid 4242, not root"));
    REQUIRE(::chown((base / "etc/dockgate/p.json").c_str(), 0, 0) == 0);
    REQUIRE(::chown((base / "etc/dockgate").c_str(), 4242, 4242) == 0);
    CHECK_THAT(read(base / "other/rel").error,
               Catch::Contains("(a directory above it) is owned by uid 4242"));
    REQUIRE(::chown((base / "etc/dockgate").c_str(), 0, 0) == 0);
    ::chmod((base / "other").c_str(), 01777);
    CHECK(read(base / "other/rel").bytes == "{}");  // sticky, the symlink root's
    REQUIRE(::lchown((base / "other/rel").c_str(), 4242, 4242) == 0);
    CHECK_THAT(read(base / "other/rel").error,
               Catch::Contains("is writable by group or others and it is owned by uid 4242"));
  }
  fs::remove_all(base);
}

// A directory the gate keeps files in (the audit file's): every component above it as the
// walk's rule says, and the directory itself root's (or ours) and writable by no one else,
// sticky or not. open_directory_nofollow keeps its own rule for its other callers (bind
// sources, mountpoints): the last component may be any user's.
TEST_CASE("root-controlled directories: the directory itself root's and no one else's to write",
          "[common][host_path][trust]") {
  namespace fs = std::filesystem;
  using dockgate::common::open_directory_nofollow;
  using dockgate::common::open_root_controlled_directory;
  const fs::path base = fs::temp_directory_path() / ("dg-trust-dir-" + std::to_string(::getpid()));
  fs::remove_all(base);
  fs::create_directories(base / "log/dockgate");
  for (const auto& d : {base, base / "log", base / "log/dockgate"}) ::chmod(d.c_str(), 0755);
  const std::string dir = (base / "log/dockgate").string();
  std::string error;
  CHECK(open_root_controlled_directory(dir, error));
  CHECK(error.empty());
  for (const auto mode : {0775, 0757, 01777, 01770}) {
    INFO(mode);
    ::chmod(dir.c_str(), static_cast<mode_t>(mode));
    error.clear();
    CHECK(!open_root_controlled_directory(dir, error));
    CHECK_THAT(error, Catch::Contains("is writable by group or others (mode " +
                                      std::string(mode & 01000 ? "1" : "0")));
  }
  ::chmod(dir.c_str(), 0755);
  // A symlink as the last component is not followed.
  fs::create_directory_symlink("dockgate", base / "log/link");
  error.clear();
  CHECK(!open_root_controlled_directory((base / "log/link").string(), error));
  CHECK_THAT(error, Catch::Contains("passes through a symlink"));
  if (::geteuid() == 0) {
    dockgate::common::walk_options walk;
    walk.only_owner_replaceable = true;
    REQUIRE(::chown(dir.c_str(), 65534, 65534) == 0);  // nobody's, mode 0755
    error.clear();
    CHECK(!open_root_controlled_directory(dir, error));
    CHECK_THAT(error, Catch::Contains("\"" + dir + "\" is owned by uid 65534, not root"));
    error.clear();
    CHECK(open_directory_nofollow(dir, error, walk));  // the walk's other callers: as before
    // A component above it another user's: the walk's own refusal.
    REQUIRE(::chown(dir.c_str(), 0, 0) == 0);
    REQUIRE(::chown((base / "log").c_str(), 65534, 65534) == 0);
    error.clear();
    CHECK(!open_root_controlled_directory(dir, error));
    CHECK_THAT(error, Catch::Contains("can be replaced by a user other than root"));
    REQUIRE(::chown((base / "log").c_str(), 0, 0) == 0);
  }
  fs::remove_all(base);
}
