#include <catch2/catch.hpp>
#include <archive.h>
#include <archive_entry.h>

#include <filesystem>
#include <fstream>

#include "dockgate/sidecar/archive.hpp"

using namespace dockgate::sidecar;

namespace {
struct member {
  std::string path;
  unsigned type = AE_IFREG;
  std::string link;  // symlink target, or hard link target when `hard`
  std::size_t size = 4;
  bool hard = false;
};

std::string make_tgz(const std::vector<member>& members) {
  std::vector<char> buffer(1 << 20);
  std::size_t used = 0;
  struct archive* a = archive_write_new();
  archive_write_add_filter_gzip(a);
  archive_write_set_format_pax_restricted(a);
  archive_write_open_memory(a, buffer.data(), buffer.size(), &used);
  for (const auto& m : members) {
    struct archive_entry* e = archive_entry_new();
    archive_entry_set_pathname(e, m.path.c_str());
    archive_entry_set_filetype(e, m.type);
    archive_entry_set_perm(e, 0644);
    if (m.hard) {
      archive_entry_set_hardlink(e, m.link.c_str());
      archive_entry_set_size(e, 0);
    } else if (m.type == AE_IFLNK) {
      archive_entry_set_symlink(e, m.link.c_str());
    } else {
      archive_entry_set_size(e, m.type == AE_IFREG ? static_cast<la_int64_t>(m.size) : 0);
    }
    archive_write_header(a, e);
    if (m.type == AE_IFREG && !m.hard) {
      std::string data(m.size, 'x');
      archive_write_data(a, data.data(), data.size());
    }
    archive_entry_free(e);
  }
  archive_write_close(a);
  archive_write_free(a);
  return std::string(buffer.data(), used);
}
}  // namespace

TEST_CASE("workspace archives: safe ones pass", "[archive]") {
  auto ok = make_tgz({{"./", AE_IFDIR}, {"./outputs/", AE_IFDIR}, {"./outputs/p.png"}, {"data/a.csv"},
                      {"data/link", AE_IFLNK, "a.csv"}, {"data/up", AE_IFLNK, "../outputs/p.png"}});
  CHECK_FALSE(check_workspace_archive(ok, 1 << 20));
}

TEST_CASE("workspace archives: escapes, devices and bombs are refused", "[archive]") {
  struct c {
    std::vector<member> members;
    std::string_view reason;
  };
  const c cases[] = {
      {{{"/etc/passwd"}}, "absolute"},
      {{{"../escape"}}, "climbs out"},
      {{{"a/../../escape"}}, "climbs out"},
      {{{"evil", AE_IFLNK, "/etc/passwd"}}, "leads out"},
      {{{"a/evil", AE_IFLNK, "../../etc"}}, "leads out"},
      {{{"hard", AE_IFREG, "../outside", 0, true}}, "leads out"},
      {{{"dev", AE_IFCHR}}, "device node"},
      {{{"fifo", AE_IFIFO}}, "device node"},
      {{{"big", AE_IFREG, "", 3000}}, "unpacks to more than"},
  };
  for (const auto& x : cases) {
    CAPTURE(x.members.front().path);
    auto problem = check_workspace_archive(make_tgz(x.members), 2000);
    REQUIRE(problem);
    CHECK_THAT(*problem, Catch::Contains(std::string(x.reason)));
  }
  CHECK(check_workspace_archive("not a tarball", 2000));
}

TEST_CASE("archives are written atomically under the key layout", "[archive]") {
  const auto dir = std::filesystem::temp_directory_path() / ("dg-archive-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto path = archive_path(dir.string(), "tenant/", "conv_1");
  REQUIRE(path);
  CHECK(*path == dir.string() + "/tenant/workspaces/conv_1.tgz");
  CHECK_FALSE(archive_path(dir.string() + "/missing", "p/", "k"));
  CHECK_FALSE(archive_path("", "p/", "k"));
  CHECK_FALSE(archive_path(dir.string(), "../up/", "k"));
  CHECK_FALSE(archive_path(dir.string(), "a/../../b", "k"));
  CHECK_FALSE(archive_path(dir.string(), std::string("a\0b", 3), "k"));
  CHECK_FALSE(archive_path(dir.string(), "a b", "k"));
  CHECK(archive_path(dir.string(), "/workspaces/", "k") == dir.string() + "/workspaces/workspaces/k.tgz");
  std::string why;
  REQUIRE(write_atomically(*path, "payload", &why));
  std::ifstream in(*path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(text == "payload");
  std::size_t files = 0;
  for (auto& e : std::filesystem::recursive_directory_iterator(dir)) files += e.is_regular_file();
  CHECK(files == 1);  // no temporary left behind
  std::filesystem::remove_all(dir);
}
