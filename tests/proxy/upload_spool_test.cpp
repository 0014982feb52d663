// The upload spool (proxy/src/upload_spool.hpp): the client's archive read with libarchive
// (every kind of entry, every compression dockerd accepts, the caps), and the gate's own
// tar written from a plan. Archives are made here with libarchive's writer.
#include "upload_spool.hpp"

#include <archive.h>
#include <archive_entry.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <string>
#include <vector>

using namespace dockgate;
using kind = policy::upload_entry::kind;

namespace {

struct entry_spec {
  std::string name;
  unsigned type = AE_IFREG;
  unsigned mode = 0644;
  std::string data;
  std::string link;      // a symlink's target
  std::string hardlink;  // a hard link's target
  bool sparse = false;
};

entry_spec file(std::string name, std::string data, unsigned mode = 0644) {
  entry_spec e;
  e.name = std::move(name);
  e.data = std::move(data);
  e.mode = mode;
  return e;
}
entry_spec of_type(std::string name, unsigned type, unsigned mode = 0755) {
  entry_spec e;
  e.name = std::move(name);
  e.type = type;
  e.mode = mode;
  return e;
}

// An archive of `entries` (pax), through `filter` (ARCHIVE_FILTER_NONE, _GZIP, ...).
std::string make_tar(const std::vector<entry_spec>& entries, int filter = ARCHIVE_FILTER_NONE) {
  std::vector<char> buffer(1 << 20);
  std::size_t used = 0;
  archive* a = archive_write_new();
  archive_write_set_format_pax(a);
  if (filter != ARCHIVE_FILTER_NONE) REQUIRE(archive_write_add_filter(a, filter) == ARCHIVE_OK);
  REQUIRE(archive_write_open_memory(a, buffer.data(), buffer.size(), &used) == ARCHIVE_OK);
  for (const auto& s : entries) {
    archive_entry* e = archive_entry_new();
    archive_entry_set_pathname(e, s.name.c_str());
    archive_entry_set_filetype(e, s.type);
    archive_entry_set_perm(e, s.mode);
    archive_entry_set_uid(e, 1000);
    archive_entry_set_gid(e, 1000);
    if (!s.link.empty()) archive_entry_set_symlink(e, s.link.c_str());
    if (!s.hardlink.empty()) archive_entry_set_hardlink(e, s.hardlink.c_str());
    // A sparse file: a hole of 64 KiB, then the data.
    archive_entry_set_size(e, static_cast<la_int64_t>(s.data.size() + (s.sparse ? 65536 : 0)));
    if (s.sparse) archive_entry_sparse_add_entry(e, 65536, static_cast<la_int64_t>(s.data.size()));
    REQUIRE(archive_write_header(a, e) >= ARCHIVE_WARN);
    if (!s.data.empty()) archive_write_data(a, s.data.data(), s.data.size());
    archive_entry_free(e);
  }
  archive_write_close(a);
  archive_write_free(a);
  return std::string(buffer.data(), used);
}

// One ustar header block of a regular file `name` whose size field says `octal_size`.
std::string ustar_header(const std::string& name, const std::string& octal_size) {
  std::string h(512, '\0');
  auto put = [&](std::size_t at, const std::string& v) { h.replace(at, v.size(), v); };
  put(0, name);
  put(100, "0000644");
  put(108, "0000000");
  put(116, "0000000");
  put(124, octal_size);
  put(136, "00000000000");
  h[156] = '0';
  put(257, std::string("ustar\0", 6));
  put(263, "00");
  put(148, "        ");
  unsigned sum = 0;
  for (unsigned char c : h) sum += c;
  char field[8];
  std::snprintf(field, sizeof field, "%06o", sum);
  put(148, std::string(field, 6) + '\0' + ' ');
  return h;
}

proxy::upload_spool spooled(std::string_view bytes) {
  proxy::upload_spool s;
  std::string error;
  REQUIRE(s.open(error));
  REQUIRE(s.append(bytes));
  return s;
}

// What a tar in a spool holds: "name type mode data" per entry.
std::vector<std::string> listing(const proxy::upload_spool& s) {
  std::vector<std::string> out;
  archive* a = archive_read_new();
  archive_read_support_format_tar(a);
  REQUIRE(lseek(s.fd(), 0, SEEK_SET) == 0);
  REQUIRE(archive_read_open_fd(a, s.fd(), 4096) == ARCHIVE_OK);
  archive_entry* e = nullptr;
  while (archive_read_next_header(a, &e) == ARCHIVE_OK) {
    std::string data(static_cast<std::size_t>(archive_entry_size(e)), '\0');
    if (!data.empty()) archive_read_data(a, data.data(), data.size());
    char mode[8];
    std::snprintf(mode, sizeof mode, "%o", archive_entry_perm(e));
    out.push_back(std::string(archive_entry_pathname(e)) +
                  (archive_entry_filetype(e) == AE_IFDIR ? " dir " : " file ") + mode + " " + data +
                  (archive_entry_xattr_count(e) ? " xattrs" : ""));
  }
  archive_read_free(a);
  return out;
}

}  // namespace

TEST_CASE("upload spool: every kind of entry is read as what it is", "[uploads][upload_spool]") {
  entry_spec link = of_type("l", AE_IFLNK, 0777);
  link.link = "/etc/passwd";
  entry_spec hard = file("h", "");
  hard.hardlink = "f";
  entry_spec sparse = file("s", std::string(4096, 'x'));
  sparse.sparse = true;
  const std::string tar = make_tar({file("f", "abc"), of_type("d/", AE_IFDIR), link, hard,
                                    of_type("p", AE_IFIFO), of_type("c", AE_IFCHR), sparse});
  auto read = spooled(tar).entries(1 << 20);
  REQUIRE(read.error.empty());
  REQUIRE(read.entries.size() == 7);
  CHECK(read.entries[0] == policy::upload_entry{"f", kind::file, false, 3});
  CHECK(read.entries[1].type == kind::directory);
  CHECK(read.entries[1].name == "d/");
  CHECK(read.entries[2].type == kind::symlink);
  CHECK(read.entries[3].type == kind::hardlink);
  CHECK(read.entries[4].type == kind::other);
  CHECK(read.entries[5].type == kind::other);
  CHECK(read.entries[6].sparse);
}

TEST_CASE("upload spool: compressed archives are read as dockerd reads them",
          "[uploads][upload_spool]") {
  for (int filter :
       {ARCHIVE_FILTER_GZIP, ARCHIVE_FILTER_BZIP2, ARCHIVE_FILTER_XZ, ARCHIVE_FILTER_ZSTD}) {
    INFO(filter);
    auto read = spooled(make_tar({file("a", "1")}, filter)).entries(1 << 20);
    CHECK(read.error.empty());
    CHECK(read.entries.size() == 1);
  }
  CHECK_FALSE(spooled("not a tar archive").entries(1 << 20).error.empty());
  CHECK(spooled("").entries(1 << 20).entries.empty());  // an empty body: an empty archive
}

TEST_CASE("upload spool: reading stops at the caps before reading on", "[uploads][upload_spool]") {
  // A header that says 1 GiB, and nothing after it: the cap answers before the data is
  // missed (without the cap, the reading fails on a truncated archive).
  const std::string header = ustar_header("big", "10000000000");
  auto big = spooled(header).entries(1 << 20);
  CHECK(big.too_large);

  const std::string two = make_tar({file("a", "1"), file("b", "2")});
  CHECK(spooled(two).entries(1, {}).too_large);
  CHECK_FALSE(spooled(two).entries(2, {}).too_large);
  CHECK(spooled(two).entries(2, {1, 100}).too_large);
  CHECK(spooled(two).entries(2, {10, 1}).too_large);
  CHECK_FALSE(spooled(two).entries(2, {2, 2}).too_large);
}

TEST_CASE("upload spool: the gate's tar holds what the plan kept, and nothing else",
          "[uploads][upload_spool]") {
  const std::string tar =
      make_tar({of_type("opt/app", AE_IFDIR), file("opt/app/run", "#!/bin/sh\n", 04755),
                of_type("opt/app/d", AE_IFDIR, 01777), file("opt/app/d/x", "x", 0600)});
  const auto in = spooled(tar);
  auto read = in.entries(1 << 20);
  REQUIRE(read.entries.size() == 4);
  const policy::upload_plan plan{"/opt/app", {std::nullopt, "run", "d", "d/x"}, 11};
  proxy::upload_spool out;
  std::string error;
  REQUIRE(out.open(error));
  REQUIRE(in.write_planned(plan, out, error));
  CHECK(listing(out) ==
        std::vector<std::string>{"run file 755 #!/bin/sh\n", "d/ dir 777 ", "d/x file 600 x"});
}
