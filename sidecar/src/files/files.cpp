// Files: upload, read, list, reset inputs, all confined to /workspace as the Aivory
// sidecar confines them (docs/aivory-api.md): a path is resolved under /workspace, and a
// symlink anywhere on it is refused, never followed.
#include "files/files.hpp"

#include <algorithm>
#include <cstdlib>
#include <utility>
#include <vector>

#include "sessions/session.hpp"
#include "sessions/session_containers.hpp"
#include "sessions/session_registry.hpp"
#include "sessions/workspace/workspace_layout.hpp"
#include "util/util.hpp"

namespace dockgate::sidecar {

using namespace std::chrono_literals;

namespace {

// Opens a workspace path once and uses what it opened (run inside the session container
// as the sandbox user): each directory beneath /workspace opened with O_NOFOLLOW relative
// to the one before (a symlink anywhere is refused, never followed), the file itself with
// O_NOFOLLOW|O_NONBLOCK and checked with fstat to be a regular file before a byte is read
// or written (a FIFO neither blocks nor is touched), a read stopped at the limit (a large
// sparse file never crosses the daemon). Each directory is also lstat'ed first and the
// opened one must be that very inode (st_dev, st_ino): gVisor (runsc 20221219) follows a
// symlink opened with O_DIRECTORY|O_NOFOLLOW (O_NOFOLLOW alone it honours), which had let
// /files/get read /etc/passwd through a /workspace/etc -> /etc link.
// When the open fails, the answer is the Aivory sidecar's (realpath, then `test -f`), found
// with lstat and realpath afterwards — only to choose the answer, never to reach a file:
//   2 not found (also: a parent missing or not a directory, for a read; a symlink that
//     resolves inside /workspace to something that is not a regular file)
//   3 not a regular file (a directory, a FIFO, a socket, a device)
//   4 larger than the limit
//   5 a symlink on the path that resolves outside /workspace
//   6 a parent is not a directory (a write: the Aivory sidecar's `mkdir -p` fails)
//   7 a symlink on the path that resolves to a regular file inside /workspace (the Aivory sidecar
//     would follow it; this never does)
//   python3 -I -c <this> read|write RELATIVE_PATH LIMIT   (write: the bytes on stdin)
constexpr std::string_view workspace_file = R"py(
import errno, os, stat, sys
mode, rel, limit = sys.argv[1], sys.argv[2], int(sys.argv[3])
def end(code, why):
    sys.stderr.write(why); sys.exit(code)
parts = rel.split('/')
if not rel or any(p in ('', '.', '..') for p in parts): end(5, 'bad path')
def opendir(p, d):
    # O_NOFOLLOW, and the inode lstat saw (a kernel that follows the link anyway is caught).
    st = os.lstat(p, dir_fd=d)
    if stat.S_ISLNK(st.st_mode): raise OSError(errno.ELOOP, 'a symlink', p)
    n = os.open(p, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=d)
    got = os.fstat(n)
    if (got.st_dev, got.st_ino) != (st.st_dev, st.st_ino):
        os.close(n); raise OSError(errno.ELOOP, 'changed under the open', p)
    return n
def classify():
    # Why the open failed, in the Aivory sidecar's terms; nothing found here is opened.
    for i in range(len(parts)):
        p = '/workspace/' + '/'.join(parts[:i + 1])
        try: st = os.lstat(p)
        except OSError: end(2, 'not found')
        if stat.S_ISLNK(st.st_mode):
            real = os.path.realpath('/workspace/' + rel)
            if real != '/workspace' and not real.startswith('/workspace/'): end(5, 'resolves outside')
            if mode == 'read' and not os.path.isfile(real): end(2, 'not found')
            end(7, 'through a symlink')
        if i < len(parts) - 1 and not stat.S_ISDIR(st.st_mode):
            end(2 if mode == 'read' else 6, 'a parent is not a directory')
        if i == len(parts) - 1 and not stat.S_ISREG(st.st_mode): end(3, 'not a regular file')
    end(1, 'open failed')
try:
    d = os.open('/workspace', os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    for p in parts[:-1]:
        if mode == 'write':
            try: os.mkdir(p, 0o755, dir_fd=d)
            except FileExistsError: pass
        n = opendir(p, d)
        os.close(d); d = n
    flags = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    if mode == 'read': f = os.open(parts[-1], os.O_RDONLY | flags, dir_fd=d)
    else: f = os.open(parts[-1], os.O_WRONLY | os.O_CREAT | flags, 0o644, dir_fd=d)
    st = os.fstat(f)
    if not stat.S_ISREG(st.st_mode): end(3, 'not a regular file')
    if mode == 'read':
        if st.st_size > limit: end(4, 'too large')
        left, out = limit + 1, sys.stdout.buffer
        while left > 0:
            b = os.read(f, min(1 << 16, left))
            if not b: break
            out.write(b); left -= len(b)
        if left <= 0: end(4, 'too large')
    else:
        os.set_blocking(f, True); os.ftruncate(f, 0)
        data = sys.stdin.buffer.read(limit + 1)
        if len(data) > limit: end(4, 'too large')
        view = memoryview(data)
        while view: view = view[os.write(f, view):]
except FileNotFoundError: classify() if mode == 'write' else end(2, 'not found')
except OSError as e:
    if e.errno in (errno.ELOOP, errno.ENOTDIR, errno.EISDIR, errno.ENXIO): classify()
    end(1, str(e))
)py";

}  // namespace

outcome<file_written> files::put_file(file_put r) {
  const std::size_t max = static_cast<std::size_t>(config_.max_upload_bytes);
  if (r.bytes.size() > max) return refuse(refusal_kind::too_large, "file too large");
  auto target = workspace_path(r.path);
  if (!target || *target == "/workspace")
    return refuse(refusal_kind::invalid, "path must be under /workspace");
  held_session held;
  if (auto refused = registry_.acquire(r.session_id, held)) return *refused;
  const auto& s = held.s;
  auto written = containers_.run_in(s->container,
                                    {"python3", "-I", "-c", std::string(workspace_file), "write",
                                     target->substr(11), std::to_string(max)},
                                    60s, std::move(r.bytes), true);
  if (!written.started) return refuse(refusal_kind::failed, "write failed: " + written.error);
  if (written.exit_code == 5)
    return refuse(refusal_kind::invalid, "path resolves outside /workspace");
  if (written.exit_code == 7)
    return refuse(refusal_kind::invalid, "path resolves through a symlink");
  if (written.exit_code == 3) return refuse(refusal_kind::invalid, "not a regular file");
  if (written.exit_code == 6)
    return refuse(refusal_kind::failed,
                  "mkdir failed: a parent of " + *target + " is not a directory");
  if (written.exit_code != 0)
    return refuse(refusal_kind::failed, "write failed: " + written.stderr_data);
  s->last_used = std::chrono::steady_clock::now();
  return file_written{};
}

outcome<std::string> files::get_file(const file_get& r) {
  auto target = workspace_path(r.path);
  if (!target) return refuse(refusal_kind::invalid, "path must be under /workspace");
  held_session held;
  if (auto refused = registry_.acquire(r.session_id, held)) return *refused;
  const auto& s = held.s;
  // Bounded: the answer is base64 in JSON, in memory.
  const std::size_t cap = static_cast<std::size_t>(config_.max_body_bytes);
  if (*target == "/workspace") return refuse(refusal_kind::not_found, "file not found");
  auto data = containers_.run_in(s->container,
                                 {"python3", "-I", "-c", std::string(workspace_file), "read",
                                  target->substr(11), std::to_string(cap)},
                                 120s, {}, false, {}, cap + 1);
  if (!data.started) return refuse(refusal_kind::failed, "read failed: " + data.error);
  // The Aivory sidecar's `test -f`: missing, or not a regular file (a directory too: it
  // is inside).
  if (data.exit_code == 2 || data.exit_code == 3)
    return refuse(refusal_kind::not_found, "file not found");
  if (data.exit_code == 4 || data.stdout_dropped)
    return refuse(refusal_kind::too_large, "file too large");
  if (data.exit_code == 5) return refuse(refusal_kind::invalid, "path resolves outside /workspace");
  if (data.exit_code == 7) return refuse(refusal_kind::invalid, "path resolves through a symlink");
  if (data.exit_code != 0) return refuse(refusal_kind::failed, "read failed: " + data.stderr_data);
  s->last_used = std::chrono::steady_clock::now();
  return std::move(data.stdout_data);
}

outcome<std::vector<file_entry>> files::list_files(const std::string& session_id) {
  held_session held;
  if (auto refused = registry_.acquire(session_id, held)) return *refused;
  const auto& s = held.s;
  auto found = containers_.run_in(
      s->container,
      {"sh", "-c",
       "find /workspace -maxdepth 6 -type f -printf '%s\\t%P\\0' 2>/dev/null | head -c 1000000"},
      30s);
  std::vector<std::pair<std::string, std::string>> entries;  // path, size
  std::string_view out = found.stdout_data;
  while (!out.empty()) {
    auto nul = out.find('\0');
    if (nul == std::string_view::npos) break;  // a record cut by head -c
    std::string_view rec = out.substr(0, nul);
    out.remove_prefix(nul + 1);
    auto tab = rec.find('\t');
    if (tab == std::string_view::npos) continue;
    entries.emplace_back(std::string(rec.substr(tab + 1)), std::string(rec.substr(0, tab)));
  }
  std::sort(entries.begin(), entries.end());
  std::vector<file_entry> listed;
  for (std::size_t i = 0; i < entries.size() && i < max_listed; ++i)
    listed.push_back(
        {std::move(entries[i].first), std::strtoll(entries[i].second.c_str(), nullptr, 10)});
  s->last_used = std::chrono::steady_clock::now();
  return listed;
}

outcome<inputs_reset> files::reset_inputs(const std::string& session_id) {
  held_session held;
  if (auto refused = registry_.acquire(session_id, held)) return *refused;
  const auto& s = held.s;
  auto reset =
      containers_.run_in(s->container, {"sh", "-c", std::string(reset_inputs_script)}, 30s);
  if (!reset.started || reset.exit_code != 0)
    return refuse(refusal_kind::failed, "reset inputs failed: " + reset.stderr_data);
  s->last_used = std::chrono::steady_clock::now();
  return inputs_reset{};
}

}  // namespace dockgate::sidecar
