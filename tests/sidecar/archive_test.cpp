#include "storage/archive.hpp"

#include <archive.h>
#include <archive_entry.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

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
  std::vector<char> buffer(8 << 20);
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

// The members of a re-packed archive, as "type path[ -> link]" lines.
std::vector<std::string> members_of(const std::string& tgz) {
  std::vector<std::string> out;
  struct archive* a = archive_read_new();
  archive_read_support_filter_all(a);
  archive_read_support_format_all(a);
  REQUIRE(archive_read_open_memory(a, tgz.data(), tgz.size()) == ARCHIVE_OK);
  struct archive_entry* e = nullptr;
  while (archive_read_next_header(a, &e) == ARCHIVE_OK) {
    std::string line = archive_entry_hardlink(e)               ? "hard "
                       : archive_entry_filetype(e) == AE_IFDIR ? "dir "
                       : archive_entry_filetype(e) == AE_IFLNK ? "link "
                                                               : "file ";
    line += archive_entry_pathname(e);
    if (archive_entry_hardlink(e))
      line += std::string(" -> ") + archive_entry_hardlink(e);
    else if (archive_entry_filetype(e) == AE_IFLNK)
      line += std::string(" -> ") + archive_entry_symlink(e);
    out.push_back(line);
  }
  archive_read_free(a);
  return out;
}
}  // namespace

TEST_CASE("restore plan: safe members pass whole, symlinks may point anywhere", "[archive]") {
  auto plan = plan_restore(make_tgz({{"./", AE_IFDIR},
                                     {"./outputs/", AE_IFDIR},
                                     {"./outputs/p.png"},
                                     {"data/a.csv"},
                                     {"data/link", AE_IFLNK, "a.csv"},
                                     {"pw", AE_IFLNK, "/etc/passwd"},
                                     {"venv/bin/python", AE_IFLNK, "../../../usr/bin/python3"},
                                     {"data/same", AE_IFREG, "data/a.csv", 0, true}}),
                           {});
  REQUIRE_FALSE(plan.error);
  CHECK(plan.skipped.empty());
  CHECK(plan.members == 7);  // the archive's own "./" is dropped
  CHECK(members_of(plan.tgz) ==
        std::vector<std::string>{"dir outputs/", "file outputs/p.png", "file data/a.csv",
                                 "link data/link -> a.csv", "link pw -> /etc/passwd",
                                 "link venv/bin/python -> ../../../usr/bin/python3",
                                 "hard data/same -> data/a.csv"});
}

TEST_CASE("restore plan: only the unsafe members are left out, each with its reason", "[archive]") {
  const std::vector<member> members{
      {"keep.txt"},
      {"/etc/passwd"},                             // absolute
      {"../escape"},                               // climbs
      {"a/../../escape"},                          // climbs
      {"out", AE_IFLNK, "/etc"},                   // a symlink: kept
      {"out/cron"},                                // written through it
      {"out/deeper/x"},                            // and deeper
      {"hard", AE_IFREG, "../outside", 0, true},   // hard link out
      {"hard2", AE_IFREG, "out/shadow", 0, true},  // hard link through the symlink
      {"dev", AE_IFCHR},
      {"fifo", AE_IFIFO},
      {"big", AE_IFREG, "", 3000},  // over the workspace size
      {"after.txt"},
  };
  auto plan = plan_restore(make_tgz(members), {2000, 100});
  REQUIRE_FALSE(plan.error);
  CHECK(members_of(plan.tgz) ==
        std::vector<std::string>{"file keep.txt", "link out -> /etc", "file after.txt"});
  std::vector<std::pair<std::string, std::string>> skipped;
  for (const auto& s : plan.skipped) skipped.emplace_back(s.path, s.reason);
  CHECK(skipped == std::vector<std::pair<std::string, std::string>>{
                       {"/etc/passwd", "absolute path"},
                       {"../escape", "path climbs out with .."},
                       {"a/../../escape", "path climbs out with .."},
                       {"out/cron", "written through the symlink out"},
                       {"out/deeper/x", "written through the symlink out"},
                       {"hard", "hard link to ../outside, not a file of this archive"},
                       {"hard2", "hard link to out/shadow, not a file of this archive"},
                       {"dev", "device node"},
                       {"fifo", "FIFO"},
                       {"big", "does not fit in the workspace (2000 bytes)"},
                   });
}

TEST_CASE("restore plan: a symlink later in the archive still guards the members before it",
          "[archive]") {
  auto plan = plan_restore(make_tgz({{"d/x"}, {"d", AE_IFLNK, "/tmp"}}), {});
  CHECK(members_of(plan.tgz) == std::vector<std::string>{"link d -> /tmp"});
  REQUIRE(plan.skipped.size() == 1);
  CHECK(plan.skipped[0].reason == "written through the symlink d");
}

TEST_CASE("restore plan: member count cap, garbage, and an archive cut short", "[archive]") {
  auto capped = plan_restore(make_tgz({{"a"}, {"b"}, {"c"}}), {1 << 20, 2});
  CHECK(capped.members == 2);
  REQUIRE(capped.skipped.size() == 1);
  CHECK(capped.skipped[0].reason == "more than 2 members");

  auto garbage = plan_restore("not a tarball", {});
  REQUIRE(garbage.error);

  std::vector<member> many;
  for (int i = 0; i < 50; ++i) many.push_back({"f" + std::to_string(i), AE_IFREG, "", 20000});
  const std::string whole = make_tgz(many);
  auto cut = plan_restore(std::string_view(whole).substr(0, whole.size() / 2), {});
  REQUIRE_FALSE(cut.error);
  CHECK(cut.members > 0);
  CHECK(cut.members < 50);
  REQUIRE_FALSE(cut.skipped.empty());
  CHECK_THAT(cut.skipped.back().reason, Catch::Contains("cut short or corrupt"));
  CHECK(check_archive(whole).members == 50);
  CHECK(check_archive(std::string_view(whole).substr(0, whole.size() / 2)).error);
}

TEST_CASE("restore plan: names with newlines and unicode pass byte for byte", "[archive]") {
  const std::string odd = "caf\xc3\xa9/line\nbreak \xe2\x9c\x93.txt";
  auto plan = plan_restore(make_tgz({{odd}}), {});
  REQUIRE(plan.skipped.empty());
  CHECK(members_of(plan.tgz) == std::vector<std::string>{"file " + odd});
}

TEST_CASE("archives are written atomically", "[archive]") {
  const auto dir =
      std::filesystem::temp_directory_path() / ("dg-archive-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "tenant/workspaces/conv_1.tgz").string();
  std::string why;
  REQUIRE(write_atomically(path, "payload", &why));
  REQUIRE(write_atomically(path, "payload 2", &why));
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(text == "payload 2");
  std::size_t files = 0;
  for (auto& e : std::filesystem::recursive_directory_iterator(dir)) files += e.is_regular_file();
  CHECK(files == 1);  // no temporary left behind
  std::filesystem::remove_all(dir);
}
