// The workspace's files as execd offers them, confined as files.cpp's are: a path is
// resolved under /workspace (util.hpp workspace_path) and then walked inside the
// container one directory at a time, each opened with O_NOFOLLOW relative to the one
// before, so a symlink anywhere on the way is refused (ELOOP), never followed; the entry
// itself is opened with O_NOFOLLOW (and O_NONBLOCK: a FIFO neither blocks nor is touched),
// or lstat'ed, and checked with fstat before a byte is read or written. Every operation
// runs as the session user (session_containers::run_in); an owner or group other than
// that user's is refused before anything is written. An image without python3 gets the
// same operations from a POSIX sh program (workspace_ops_sh.hpp, which says what differs).
#include "files/sandbox_files.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <string_view>
#include <utility>

#include "files/workspace_ops_sh.hpp"
#include "sessions/session.hpp"
#include "sessions/session_containers.hpp"
#include "sessions/session_registry.hpp"
#include "util/util.hpp"

namespace dockgate::sidecar {

using namespace std::chrono_literals;

namespace {

// python3 -I -c <this> OP ARGS…; paths relative to /workspace ("" is /workspace). (Without
// python3: workspace_ops_sh.hpp, the same operations in sh.)
// Exit codes: 2 not found, 3 not the kind asked (a directory for a file, …), 4 too large,
// 5 a symlink on the path, 6 a parent is not a directory, 8 an owner or group that is not
// the session user's, 9 a range past the end (stderr: the size), 10 permission denied.
// Records (info, list): type, size, mtime, ctime, owner, group, mode (octal digits),
// path, tab-separated, each ended by NUL.
constexpr std::string_view workspace_ops = R"py(
import errno, grp, os, pwd, stat, sys, time
op, args, out = sys.argv[1], sys.argv[2:], sys.stdout.buffer
ND = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
def end(code, why):
    sys.stderr.write(why); sys.exit(code)
def fail(e):
    if e.errno == errno.ENOENT: end(2, 'not found')
    if e.errno == errno.ELOOP: end(5, 'a symlink on the path')
    if e.errno == errno.ENOTDIR: end(6, 'a parent is not a directory')
    if e.errno in (errno.EISDIR, errno.ENXIO): end(3, 'not a regular file')
    if e.errno in (errno.EACCES, errno.EPERM): end(10, 'permission denied')
    end(1, str(e))
def parts_of(rel):
    parts = rel.split('/') if rel else []
    if any(p in ('', '.', '..') for p in parts): end(5, 'bad path')
    return parts
def opendir(parts, make=False):
    # Each directory opened O_NOFOLLOW and checked to be the inode lstat saw: gVisor (runsc
    # 20221219) follows a symlink opened with O_DIRECTORY|O_NOFOLLOW.
    try:
        d = os.open('/workspace', ND)
        for p in parts:
            if make:
                try: os.mkdir(p, 0o755, dir_fd=d)
                except FileExistsError: pass
            st = os.lstat(p, dir_fd=d)
            if stat.S_ISLNK(st.st_mode): raise OSError(errno.ELOOP, 'a symlink', p)
            n = os.open(p, ND, dir_fd=d); os.close(d); d = n
            got = os.fstat(d)
            if (got.st_dev, got.st_ino) != (st.st_dev, st.st_ino): raise OSError(errno.ELOOP, 'changed', p)
        return d
    except OSError as e: fail(e)
def lstat_at(parts):
    try:
        if not parts: return os.stat('/workspace', follow_symlinks=False)
        return os.stat(parts[-1], dir_fd=opendir(parts[:-1]), follow_symlinks=False)
    except OSError as e: fail(e)
def named(i, look):
    try: return look(i)
    except KeyError: return str(i)
def ts(t): return time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(t))
def record(path, st):
    m = st.st_mode
    kind = 'file' if stat.S_ISREG(m) else 'directory' if stat.S_ISDIR(m) else 'symlink' if stat.S_ISLNK(m) else 'other'
    fields = [kind, str(st.st_size), ts(st.st_mtime), ts(st.st_ctime),
              named(st.st_uid, lambda u: pwd.getpwuid(u).pw_name),
              named(st.st_gid, lambda g: grp.getgrgid(g).gr_name), oct(m & 0o7777)[2:]]
    out.write(('\t'.join(fields) + '\t').encode() + os.fsencode(path) + b'\0')
def mine(owner, group):
    try:
        if owner and (int(owner) if owner.isdigit() else pwd.getpwnam(owner).pw_uid) != os.getuid(): end(8, 'owner')
        if group and (int(group) if group.isdigit() else grp.getgrnam(group).gr_gid) != os.getgid(): end(8, 'group')
    except KeyError: end(8, 'unknown owner or group')
def opened(parts, flags, make=False):
    if not parts: end(3, 'not a regular file')
    d = opendir(parts[:-1], make)
    try: f = os.open(parts[-1], flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o644, dir_fd=d)
    except OSError as e: fail(e)
    if not stat.S_ISREG(os.fstat(f).st_mode): end(3, 'not a regular file')
    return f
def write(rel, limit, mode, owner, group):
    mine(owner, group)
    f = opened(parts_of(rel), os.O_WRONLY | os.O_CREAT, True)
    os.set_blocking(f, True); os.ftruncate(f, 0)
    data = sys.stdin.buffer.read(int(limit) + 1)
    if len(data) > int(limit): end(4, 'too large')
    view = memoryview(data)
    while view: view = view[os.write(f, view):]
    if int(mode): os.fchmod(f, int(mode, 8))
def read(rel, limit, first, last):
    f = opened(parts_of(rel), os.O_RDONLY)
    size = os.fstat(f).st_size
    a = int(first) if first else 0
    b = min(int(last), size - 1) if last else size - 1
    if first and a >= size: end(9, str(size))
    if b - a + 1 > int(limit): end(4, 'too large')
    out.write(('%d %d %d\n' % (size, a, b)).encode())
    os.set_blocking(f, True); os.lseek(f, a, 0); left = b - a + 1
    while left > 0:
        chunk = os.read(f, min(1 << 16, left))
        if not chunk: break
        out.write(chunk); left -= len(chunk)
def rmtree(d, name):
    if stat.S_ISDIR(os.stat(name, dir_fd=d, follow_symlinks=False).st_mode):
        fd = os.open(name, ND, dir_fd=d)
        for n in os.listdir(fd): rmtree(fd, n)
        os.close(fd); os.rmdir(name, dir_fd=d)
    else: os.unlink(name, dir_fd=d)
def walk(d, prefix, depth, left):
    for n in sorted(os.listdir(d)):
        if left[0] <= 0: return
        st = os.stat(n, dir_fd=d, follow_symlinks=False); record(prefix + '/' + n, st); left[0] -= 1
        if depth > 1 and stat.S_ISDIR(st.st_mode):
            fd = os.open(n, ND, dir_fd=d); walk(fd, prefix + '/' + n, depth - 1, left); os.close(fd)
def removed(rel, directory):
    parts = parts_of(rel)
    if not parts: end(3, 'not /workspace itself')
    is_dir = stat.S_ISDIR(lstat_at(parts).st_mode)
    if is_dir != directory: end(3, 'a directory' if is_dir else 'not a directory')
    d = opendir(parts[:-1])
    try: rmtree(d, parts[-1])
    except OSError as e: fail(e)
def chmod(rel, mode, owner, group):
    mine(owner, group)
    parts = parts_of(rel)
    st = lstat_at(parts)
    if stat.S_ISLNK(st.st_mode): end(5, 'a symlink')
    if not (stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode)): end(3, 'not a file or directory')
    f = opendir(parts) if stat.S_ISDIR(st.st_mode) else opened(parts, os.O_RDONLY)
    if int(mode): os.fchmod(f, int(mode, 8))
def move(src, dest):
    s, t = parts_of(src), parts_of(dest)
    if not s or not t: end(3, 'not /workspace itself')
    lstat_at(s)
    try: os.rename(s[-1], t[-1], src_dir_fd=opendir(s[:-1]), dst_dir_fd=opendir(t[:-1]))
    except OSError as e: fail(e)
def search(rel, pattern, limit):
    import fnmatch
    parts = parts_of(rel)
    if not stat.S_ISDIR(lstat_at(parts).st_mode): end(3, 'not a directory')
    root, left = '/workspace' + ('/' + rel if rel else ''), [int(limit)]
    def visit(d, sub, depth):
        for n in sorted(os.listdir(d)):
            if left[0] <= 0 or depth > 64: return
            st = os.stat(n, dir_fd=d, follow_symlinks=False); path = sub + n
            if stat.S_ISDIR(st.st_mode):
                fd = os.open(n, ND, dir_fd=d); visit(fd, path + '/', depth + 1); os.close(fd)
            elif pattern in ('', '**', '*') or fnmatch.fnmatchcase(path if '/' in pattern else n, pattern):
                record(root + '/' + path, st); left[0] -= 1
    try: visit(opendir(parts), '', 1)
    except OSError as e: fail(e)
def replace(rel, limit, old, new):
    f = opened(parts_of(rel), os.O_RDWR)
    if os.fstat(f).st_size > int(limit): end(4, 'too large')
    os.set_blocking(f, True)
    data, chunks = b'', []
    while True:
        b = os.read(f, 1 << 16)
        if not b: break
        chunks.append(b)
    data = b''.join(chunks); o, n = os.fsencode(old), os.fsencode(new)
    count = data.count(o)
    if count:
        data = data.replace(o, n)
        if len(data) > int(limit): end(4, 'too large')
        os.lseek(f, 0, 0); os.ftruncate(f, 0); view = memoryview(data)
        while view: view = view[os.write(f, view):]
    out.write(str(count).encode())
def lines(rel, limit, offset, count):
    f = os.fdopen(opened(parts_of(rel), os.O_RDONLY), 'rb'); os.set_blocking(f.fileno(), True)
    left, first, n = int(limit), int(offset), int(count)
    for i, line in enumerate(f, 1):
        if i < first: continue
        if n == 0 or len(line) > left: end(4 if n else 0, 'too large')
        out.write(line); left -= len(line); n -= 1
if op == 'write': write(*args)
elif op == 'lines': lines(*args)
elif op == 'chmod': chmod(*args)
elif op == 'mv': move(*args)
elif op == 'search': search(*args)
elif op == 'replace': replace(*args)
elif op == 'read': read(*args)
elif op == 'info':
    for rel in args: record('/workspace' + ('/' + rel if rel else ''), lstat_at(parts_of(rel)))
elif op == 'rm': removed(args[0], False)
elif op == 'rmdir': removed(args[0], True)
elif op == 'mkdir':
    d = opendir(parts_of(args[0]), True)
    if int(args[1]): os.fchmod(d, int(args[1], 8))
elif op == 'list':
    parts = parts_of(args[0])
    if not stat.S_ISDIR(lstat_at(parts).st_mode): end(5 if stat.S_ISLNK(lstat_at(parts).st_mode) else 3, 'not a directory')
    try: walk(opendir(parts), '/workspace' + ('/' + args[0] if args[0] else ''), int(args[1]), [int(args[2])])
    except OSError as e: fail(e)
)py";

// sh -c <this> sh OP ARGS…: the python3 program where the image has python3 (passed to it
// as one single-quoted word), else the sh one (workspace_ops_sh.hpp). Made once.
const std::string& workspace_program() {
  static const std::string program = [] {
    std::string quoted;
    for (char c : workspace_ops) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return "py='" + quoted +
           "'\nif command -v python3 >/dev/null 2>&1; then exec python3 -I -c \"$py\" \"$@\"; "
           "fi\nunset py\n" +
           std::string(workspace_ops_sh);
  }();
  return program;
}

// Within /workspace, relative to it ("" for /workspace itself); nullopt outside.
std::optional<std::string> relative(const std::string& path) {
  auto full = workspace_path(path);
  if (!full) return std::nullopt;
  return *full == "/workspace" ? std::string() : full->substr(11);
}

// A record's type as execd names it: the python3 program's word, or stat's %F (the sh one).
std::string type_word(const std::string& t) {
  if (t == "regular file" || t == "regular empty file") return "file";
  if (t == "symbolic link") return "symlink";
  if (t == "file" || t == "directory" || t == "symlink") return t;
  return "other";
}

// A record's time: RFC 3339 as the python3 program writes it, or seconds since the epoch
// (the sh one) written so.
std::string rfc3339_of(const std::string& t) {
  if (t.empty() || !std::all_of(t.begin(), t.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return t;
  const std::time_t when = static_cast<std::time_t>(std::strtoll(t.c_str(), nullptr, 10));
  std::tm utc{};
  ::gmtime_r(&when, &utc);
  char out[32];
  std::strftime(out, sizeof out, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return out;
}

std::vector<file_info> records(std::string_view out) {
  std::vector<file_info> listed;
  while (!out.empty()) {
    const auto nul = out.find('\0');
    if (nul == std::string_view::npos) break;
    std::string_view rec = out.substr(0, nul);
    out.remove_prefix(nul + 1);
    std::string f[7];
    for (auto& field : f) {
      const auto tab = rec.find('\t');
      if (tab == std::string_view::npos) break;
      field = std::string(rec.substr(0, tab));
      rec.remove_prefix(tab + 1);
    }
    listed.push_back({std::string(rec), type_word(f[0]), std::strtoll(f[1].c_str(), nullptr, 10),
                      rfc3339_of(f[2]), rfc3339_of(f[3]), f[4], f[5],
                      std::strtoll(f[6].c_str(), nullptr, 10)});
  }
  return listed;
}

// Octal digits written in decimal (755): valid when every digit is 0-7 and at most 7777.
bool valid_mode(std::int64_t mode) {
  if (mode < 0 || mode > 7777) return false;
  for (auto m = mode; m > 0; m /= 10)
    if (m % 10 > 7) return false;
  return true;
}

}  // namespace

std::optional<refusal> workspace_refusal(std::int64_t exit_code, const std::string& path,
                                         const std::string& err) {
  switch (exit_code) {
    case 0:
      return std::nullopt;
    case 2:
      return refuse(refusal_kind::not_found, "file not found: " + path);
    case 3:
      return refuse(refusal_kind::invalid, path + ": " + err);
    case 4:
      return refuse(refusal_kind::too_large, path + ": too large");
    case 5:
      return refuse(refusal_kind::invalid, path + ": resolves through a symlink");
    case 6:
      return refuse(refusal_kind::invalid, path + ": a parent is not a directory");
    case 8:
      return refuse(refusal_kind::invalid,
                    path + ": owner and group can only be the sandbox's user (" + err + ")");
    case 9:
      return refuse(refusal_kind::conflict, err);
    case 10:
      return refuse(refusal_kind::failed, path + ": permission denied");
    case 11:
      return refuse(refusal_kind::invalid,
                    path + ": this operation needs python3 in the sandbox's image");
    default:
      return refuse(refusal_kind::failed, path + ": " + err);
  }
}

outcome<sandbox_files::ran> sandbox_files::run(const std::string& session_id,
                                               std::vector<std::string> args,
                                               std::string stdin_data) const {
  held_session held;
  if (auto refused = registry_.acquire(session_id, held)) return *refused;
  std::vector<std::string> cmd{"sh", "-c", workspace_program(), "sh"};
  cmd.insert(cmd.end(), std::make_move_iterator(args.begin()), std::make_move_iterator(args.end()));
  const bool attach = !stdin_data.empty() || cmd[4] == "write";
  auto done = containers_.run_in(held.s->container, std::move(cmd), 120s, std::move(stdin_data),
                                 attach, {}, static_cast<std::size_t>(config_.max_body_bytes) + 64);
  if (!done.started) return refuse(refusal_kind::engine_failed, "exec failed: " + done.error);
  if (done.exit_code == 127)
    return refuse(refusal_kind::failed, "the sandbox's image lacks a tool: " + done.stderr_data);
  held.s->last_used = std::chrono::steady_clock::now();
  return ran{done.exit_code, std::move(done.stdout_data), std::move(done.stderr_data)};
}

outcome<files_done> sandbox_files::upload(const std::string& session_id, sandbox_upload u) const {
  auto rel = relative(u.path);
  if (!rel || rel->empty()) return refuse(refusal_kind::invalid, "path must be under /workspace");
  if (u.bytes.size() > static_cast<std::size_t>(config_.max_upload_bytes))
    return refuse(refusal_kind::too_large, "file too large");
  if (!valid_mode(u.mode)) return refuse(refusal_kind::invalid, "mode must be octal digits (755)");
  auto done = run(session_id,
                  {"write", *rel, std::to_string(config_.max_upload_bytes), std::to_string(u.mode),
                   u.owner, u.group},
                  std::move(u.bytes));
  if (!done) return done.error();
  if (auto r = workspace_refusal(done->exit_code, u.path, done->err)) return *r;
  return files_done{};
}

outcome<file_slice> sandbox_files::download(const std::string& session_id, const std::string& path,
                                            std::optional<byte_range> range) const {
  auto rel = relative(path);
  if (!rel) return refuse(refusal_kind::invalid, "path must be under /workspace");
  std::string first, last;
  if (range) {
    first = std::to_string(range->first);
    if (range->last) last = std::to_string(*range->last);
  }
  auto done = run(session_id, {"read", *rel, std::to_string(config_.max_body_bytes), first, last});
  if (!done) return done.error();
  if (auto r = workspace_refusal(done->exit_code, path, done->err)) return *r;
  const auto nl = done->out.find('\n');
  if (nl == std::string::npos) return refuse(refusal_kind::failed, "read failed");
  file_slice s;
  char* p = done->out.data();
  s.size = std::strtoll(p, &p, 10);
  s.first = std::strtoll(p, &p, 10);
  s.last = std::strtoll(p, &p, 10);
  s.bytes = done->out.substr(nl + 1);
  return s;
}

outcome<std::string> sandbox_files::read_lines(const std::string& session_id,
                                               const std::string& path, std::int64_t offset,
                                               std::int64_t count) const {
  auto rel = relative(path);
  if (!rel) return refuse(refusal_kind::invalid, "path must be under /workspace");
  if (offset < 1 || count < -1) return refuse(refusal_kind::invalid, "offset >= 1, limit >= 0");
  auto done = run(session_id, {"lines", *rel, std::to_string(config_.max_body_bytes),
                               std::to_string(offset), std::to_string(count)});
  if (!done) return done.error();
  if (auto r = workspace_refusal(done->exit_code, path, done->err)) return *r;
  return std::move(done->out);
}

outcome<std::vector<file_info>> sandbox_files::info(const std::string& session_id,
                                                    const std::vector<std::string>& paths) const {
  std::vector<std::string> args{"info"};
  for (const auto& p : paths) {
    auto rel = relative(p);
    if (!rel) return refuse(refusal_kind::invalid, p + ": path must be under /workspace");
    args.push_back(*rel);
  }
  auto done = run(session_id, std::move(args));
  if (!done) return done.error();
  if (auto r =
          workspace_refusal(done->exit_code, paths.size() == 1 ? paths[0] : "a path", done->err))
    return *r;
  return records(done->out);
}

outcome<files_done> sandbox_files::remove_file(const std::string& session_id,
                                               const std::string& path) const {
  auto rel = relative(path);
  if (!rel) return refuse(refusal_kind::invalid, "path must be under /workspace");
  auto done = run(session_id, {"rm", *rel});
  if (!done) return done.error();
  if (auto r = workspace_refusal(done->exit_code, path, done->err)) return *r;
  return files_done{};
}

outcome<files_done> sandbox_files::make_directory(const std::string& session_id,
                                                  const std::string& path,
                                                  std::int64_t mode) const {
  auto rel = relative(path);
  if (!rel) return refuse(refusal_kind::invalid, "path must be under /workspace");
  if (!valid_mode(mode)) return refuse(refusal_kind::invalid, "mode must be octal digits (755)");
  auto done = run(session_id, {"mkdir", *rel, std::to_string(mode)});
  if (!done) return done.error();
  if (auto r = workspace_refusal(done->exit_code, path, done->err)) return *r;
  return files_done{};
}

outcome<files_done> sandbox_files::remove_directory(const std::string& session_id,
                                                    const std::string& path) const {
  auto rel = relative(path);
  if (!rel) return refuse(refusal_kind::invalid, "path must be under /workspace");
  auto done = run(session_id, {"rmdir", *rel});
  if (!done) return done.error();
  if (auto r = workspace_refusal(done->exit_code, path, done->err)) return *r;
  return files_done{};
}

outcome<std::vector<file_info>> sandbox_files::list(const std::string& session_id,
                                                    const std::string& path, int depth) const {
  auto rel = relative(path);
  if (!rel) return refuse(refusal_kind::invalid, "path must be under /workspace");
  if (depth < 1) return refuse(refusal_kind::invalid, "depth must be >= 1");
  auto done = run(session_id,
                  {"list", *rel, std::to_string(std::min(depth, 64)), std::to_string(max_listed)});
  if (!done) return done.error();
  if (auto r = workspace_refusal(done->exit_code, path, done->err)) return *r;
  auto listed = records(done->out);
  std::sort(listed.begin(), listed.end(),
            [](const file_info& a, const file_info& b) { return a.path < b.path; });
  return listed;
}

outcome<files_done> sandbox_files::set_permissions(const std::string& session_id,
                                                   const file_permissions& p) const {
  auto rel = relative(p.path);
  if (!rel) return refuse(refusal_kind::invalid, "path must be under /workspace");
  if (!valid_mode(p.mode)) return refuse(refusal_kind::invalid, "mode must be octal digits (755)");
  auto done = run(session_id, {"chmod", *rel, std::to_string(p.mode), p.owner, p.group});
  if (!done) return done.error();
  if (auto r = workspace_refusal(done->exit_code, p.path, done->err)) return *r;
  return files_done{};
}

outcome<files_done> sandbox_files::move(const std::string& session_id, const std::string& src,
                                        const std::string& dest) const {
  auto from = relative(src);
  auto to = relative(dest);
  if (!from || !to) return refuse(refusal_kind::invalid, "paths must be under /workspace");
  auto done = run(session_id, {"mv", *from, *to});
  if (!done) return done.error();
  if (auto r = workspace_refusal(done->exit_code, src + " -> " + dest, done->err)) return *r;
  return files_done{};
}

outcome<std::vector<file_info>> sandbox_files::search(const std::string& session_id,
                                                      const std::string& path,
                                                      const std::string& pattern) const {
  auto rel = relative(path);
  if (!rel) return refuse(refusal_kind::invalid, "path must be under /workspace");
  auto done = run(session_id, {"search", *rel, pattern, std::to_string(max_listed)});
  if (!done) return done.error();
  if (auto r = workspace_refusal(done->exit_code, path, done->err)) return *r;
  auto found = records(done->out);  // (the sh program's come in find's order)
  std::sort(found.begin(), found.end(),
            [](const file_info& a, const file_info& b) { return a.path < b.path; });
  return found;
}

outcome<std::int64_t> sandbox_files::replace(const std::string& session_id, const std::string& path,
                                             const std::string& old_text,
                                             const std::string& new_text) const {
  auto rel = relative(path);
  if (!rel) return refuse(refusal_kind::invalid, "path must be under /workspace");
  if (old_text.empty()) return refuse(refusal_kind::invalid, "old must not be empty");
  auto done = run(session_id,
                  {"replace", *rel, std::to_string(config_.max_upload_bytes), old_text, new_text});
  if (!done) return done.error();
  if (auto r = workspace_refusal(done->exit_code, path, done->err)) return *r;
  return static_cast<std::int64_t>(std::strtoll(done->out.c_str(), nullptr, 10));
}

}  // namespace dockgate::sidecar
