// Audit sinks and delivery (docs/operating.md, "Audit sinks"): a file rotated by size and
// opened again on SIGHUP, the journal's native protocol, syslog (RFC 5424) over unix
// datagrams, UDP and TCP, blocking mode failing closed, a sink that cannot be opened
// stopping the gate at start (a file's directory another user owns or may write among
// them), a removed file never written into, and an outage shown on /metrics. Each test judges what
// the sink received (the files, the datagrams, the stream), counted against the answers the client
// received, with the gate stopped by SIGTERM right behind the last answer (before a batch's flush).
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <future>
#include <map>
#include <regex>
#include <sstream>
#include <thread>

#include "harness.hpp"

using namespace dockgate::test;
using namespace std::chrono_literals;

namespace {

const std::string cli_policy = "compose/policies/docker-cli.json";

std::string quoted(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

std::size_t occurrences(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

// n pings on one connection, the last one closing it; returns the answers' bytes.
std::string pings(const proxy_process& proxy, int n) {
  std::string requests;
  for (int i = 1; i < n; ++i) requests += "GET /_ping HTTP/1.1\r\nHost: d\r\n\r\n";
  requests += "GET /_ping HTTP/1.1\r\nHost: d\r\nConnection: close\r\n\r\n";
  return raw_exchange(proxy.socket_path(), requests, false, 20000ms).bytes;
}

std::string temp_dir() {
  char tmpl[] = "/tmp/dockgate-sinks.XXXXXX";
  REQUIRE(::mkdtemp(tmpl));
  return tmpl;
}

struct dir_guard {
  std::string path;
  ~dir_guard() { run("rm -rf " + quoted(path)); }
};

// A datagram socket the test binds: the journal's or a syslog daemon's.
struct datagram_receiver {
  int fd = -1;
  std::string path;
  int port = 0;
  explicit datagram_receiver(const std::string& unix_path) : path(unix_path) {
    fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::snprintf(a.sun_path, sizeof a.sun_path, "%s", path.c_str());
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    grow();
  }
  datagram_receiver() {  // UDP on 127.0.0.1
    fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    socklen_t len = sizeof a;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    port = ntohs(a.sin_port);
    grow();
  }
  void grow() {
    int size = 4 << 20;
    ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
  }
  ~datagram_receiver() { ::close(fd); }
  // Everything received so far (the gate has exited: nothing more is on its way).
  std::vector<std::string> received() const {
    std::vector<std::string> out;
    std::vector<char> buf(1 << 20);
    for (;;) {
      const ssize_t n = ::recv(fd, buf.data(), buf.size(), MSG_DONTWAIT);
      if (n < 0) break;
      out.emplace_back(buf.data(), static_cast<std::size_t>(n));
    }
    return out;
  }
};

// The journal's native protocol: FIELD=value lines, or FIELD\n<le64 length>value\n.
std::map<std::string, std::string> parse_journal_entry(const std::string& d) {
  std::map<std::string, std::string> fields;
  std::size_t at = 0;
  while (at < d.size()) {
    const auto nl = d.find('\n', at);
    REQUIRE(nl != std::string::npos);
    const auto eq = d.find('=', at);
    if (eq != std::string::npos && eq < nl) {
      fields[d.substr(at, eq - at)] = d.substr(eq + 1, nl - eq - 1);
      at = nl + 1;
    } else {
      const std::string name = d.substr(at, nl - at);
      REQUIRE(nl + 9 <= d.size());
      std::uint64_t len = 0;
      for (int i = 7; i >= 0; --i) len = len << 8 | static_cast<unsigned char>(d[nl + 1 + i]);
      REQUIRE(nl + 9 + len + 1 <= d.size());
      fields[name] = d.substr(nl + 9, len);
      REQUIRE(d[nl + 9 + len] == '\n');
      at = nl + 9 + len + 1;
    }
  }
  return fields;
}

// The value of the series `name{sink="SINK"}` in a /metrics answer, or -1 if absent.
long long sink_metric(const std::string& scrape, const std::string& name, const std::string& sink) {
  const std::string key = name + "{sink=\"" + sink + "\"} ";
  const auto at = scrape.find("\n" + key);
  if (at == std::string::npos) return -1;
  return std::stoll(scrape.substr(at + 1 + key.size()));
}

std::string request_id_of(const std::string& answer) {
  const auto at = answer.find("Dockgate-Request-Id: ");
  if (at == std::string::npos) return {};
  return answer.substr(at + 21, answer.find("\r\n", at) - at - 21);
}

// RFC 5424: <PRI>1 TIMESTAMP HOSTNAME APP-NAME PROCID MSGID STRUCTURED-DATA MSG.
const std::regex rfc5424(
    R"(^<(\d{1,3})>1 \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z [!-~]{1,255} dockgate-proxy \d+ ([!-~]{1,32}) - (\{"time":.*\})$)");

}  // namespace

TEST_CASE("A file sink rotates at --audit-max-bytes, keeps --audit-keep files, loses no line",
          "[integration][audit][sinks]") {
  dir_guard d{temp_dir()};
  const std::string log = d.path + "/audit.log";
  proxy_process proxy(cli_policy,
                      {"--audit", "file:" + log, "--audit-max-bytes", "4000", "--audit-keep", "3"});
  CHECK(occurrences(pings(proxy, 25), "HTTP/1.1 200") == 25);
  auto [status, took] = proxy.terminate();  // before the batch's flush
  CHECK(status == 0);
  // Rotated (PATH.1 the newest), each file within the limit, whole lines, every line kept.
  std::size_t lines = 0;
  for (const auto& f : {log + ".2", log + ".1", log}) {
    INFO(f);
    REQUIRE(exists(f));
    const std::string text = slurp(f);
    CHECK(text.size() <= 4000);
    CHECK(text.back() == '\n');
    for (const auto& l : lines_of(text)) CHECK((l.starts_with("{\"time\":") && l.ends_with("}")));
    lines += lines_of(text).size();
  }
  CHECK(lines + (exists(log + ".3") ? lines_of(slurp(log + ".3")).size() : 0) == 25);
  CHECK(proxy.audit_log().empty());  // the file replaces stdout

  // More than the kept files hold: the oldest go, never more than --audit-keep of them.
  proxy_process again(cli_policy,
                      {"--audit", "file:" + log, "--audit-max-bytes", "4000", "--audit-keep", "3"});
  CHECK(occurrences(pings(again, 60), "HTTP/1.1 200") == 60);
  again.terminate();
  CHECK(exists(log + ".3"));
  CHECK(!exists(log + ".4"));
  for (const auto& f : {log + ".3", log + ".2", log + ".1", log}) CHECK(slurp(f).size() <= 4000);
}

TEST_CASE("SIGHUP opens a file sink again at its path after logrotate renamed it",
          "[integration][audit][sinks][signals]") {
  dir_guard d{temp_dir()};
  const std::string log = d.path + "/audit.log";
  proxy_process proxy(cli_policy, {"--audit", "file:" + log});
  CHECK(occurrences(pings(proxy, 5), "HTTP/1.1 200") == 5);
  // logrotate's create mode: rename, then SIGHUP; the signal comes before the batch's flush.
  REQUIRE(::rename(log.c_str(), (log + ".old").c_str()) == 0);
  ::kill(proxy.pid(), SIGHUP);
  for (int i = 0; i < 200 && occurrences(slurp(proxy.dir() + "/proxy.err"), "SIGHUP: policy") == 0;
       ++i)
    std::this_thread::sleep_for(25ms);
  REQUIRE(occurrences(slurp(proxy.dir() + "/proxy.err"), "SIGHUP: policy") == 1);
  CHECK(occurrences(pings(proxy, 7), "HTTP/1.1 200") == 7);
  proxy.terminate();
  // The lines before the signal in the renamed file, the later ones at PATH: none lost.
  CHECK(lines_of(slurp(log + ".old")).size() == 5);
  CHECK(lines_of(slurp(log)).size() == 7);
}

TEST_CASE("The journald sink speaks the native protocol, one entry a line, fields of its own",
          "[integration][audit][sinks]") {
  dir_guard d{temp_dir()};
  datagram_receiver journal(d.path + "/journal.sock");
  proxy_process proxy(cli_policy, {"--audit", "journald"},
                      {"DOCKGATE_JOURNAL_SOCKET=" + journal.path});
  const auto ping = raw_exchange(proxy.socket_path(),
                                 "GET /_ping HTTP/1.1\r\nHost: d\r\nConnection: close\r\n\r\n");
  const auto refused = raw_exchange(proxy.socket_path(),
                                    "POST /v1.41/swarm/init HTTP/1.1\r\nHost: d\r\nContent-Length: "
                                    "2\r\nConnection: close\r\n\r\n{}");
  CHECK(ping.status() == 200);
  CHECK(refused.status() == 403);
  proxy.terminate();
  const auto entries = journal.received();
  REQUIRE(entries.size() == 2);
  const auto first = parse_journal_entry(entries[0]), second = parse_journal_entry(entries[1]);
  CHECK(first.at("MESSAGE").starts_with("{\"time\":"));
  CHECK(first.at("MESSAGE").find("\"operation\":\"SystemPing\"") != std::string::npos);
  CHECK(first.at("SYSLOG_IDENTIFIER") == "dockgate-proxy");
  CHECK(first.at("PRIORITY") == "6");
  CHECK(first.at("DOCKGATE_OPERATION") == "SystemPing");
  CHECK(first.at("DOCKGATE_VERDICT") == "allow");
  CHECK(first.at("DOCKGATE_STATUS") == "200");
  CHECK(first.at("DOCKGATE_REQUEST_ID") == request_id_of(ping.bytes));
  CHECK(second.at("DOCKGATE_OPERATION") == "SwarmInit");
  CHECK(second.at("DOCKGATE_VERDICT") == "deny");
  CHECK(second.at("PRIORITY") == "5");
  CHECK(second.at("DOCKGATE_REQUEST_ID") == request_id_of(refused.bytes));
}

TEST_CASE("The syslog sink sends RFC 5424 over unix datagrams, UDP and TCP",
          "[integration][audit][sinks]") {
  dir_guard d{temp_dir()};
  auto check_messages = [](const std::vector<std::string>& messages, std::size_t n) {
    REQUIRE(messages.size() == n);
    for (const auto& m : messages) {
      INFO(m);
      std::smatch parts;
      REQUIRE(std::regex_match(m, parts, rfc5424));
      CHECK(parts[1] == "86");  // authpriv, info
      CHECK(parts[2] == "SystemPing");
    }
  };
  SECTION("unix datagram socket") {
    datagram_receiver log(d.path + "/log.sock");
    proxy_process proxy(cli_policy, {"--audit", "syslog:" + log.path});
    CHECK(occurrences(pings(proxy, 3), "HTTP/1.1 200") == 3);
    proxy.terminate();
    check_messages(log.received(), 3);
  }
  SECTION("UDP, and stdout as well") {
    datagram_receiver log;
    proxy_process proxy(
        cli_policy,
        {"--audit", "syslog:udp://127.0.0.1:" + std::to_string(log.port), "--audit", "stdout"});
    CHECK(occurrences(pings(proxy, 3), "HTTP/1.1 200") == 3);
    proxy.terminate();
    check_messages(log.received(), 3);
    CHECK(lines_of(proxy.audit_log()).size() == 3);
  }
  SECTION("TCP, octet-counted frames") {
    const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    socklen_t len = sizeof a;
    ::getsockname(listener, reinterpret_cast<sockaddr*>(&a), &len);
    REQUIRE(::listen(listener, 4) == 0);
    auto stream = std::async(std::launch::async, [listener] {
      const int c = ::accept(listener, nullptr, nullptr);
      std::string got;
      char buf[4096];
      for (ssize_t n; (n = ::read(c, buf, sizeof buf)) > 0;)
        got.append(buf, static_cast<std::size_t>(n));
      ::close(c);
      return got;
    });
    proxy_process proxy(cli_policy,
                        {"--audit", "syslog:tcp://127.0.0.1:" + std::to_string(ntohs(a.sin_port))});
    CHECK(occurrences(pings(proxy, 4), "HTTP/1.1 200") == 4);
    proxy.terminate();
    const std::string got = stream.get();
    ::close(listener);
    std::vector<std::string> frames;
    for (std::size_t at = 0; at < got.size();) {
      const auto sp = got.find(' ', at);
      REQUIRE(sp != std::string::npos);
      const std::size_t n = std::stoul(got.substr(at, sp - at));
      REQUIRE(sp + 1 + n <= got.size());
      frames.push_back(got.substr(sp + 1, n));
      at = sp + 1 + n;
    }
    check_messages(frames, 4);
  }
}

TEST_CASE("Blocking mode: the decision line is written before forwarding, the answer's after",
          "[integration][audit][sinks][shutdown]") {
  dir_guard d{temp_dir()};
  const std::string log = d.path + "/audit.log";
  proxy_process proxy(cli_policy, {"--audit", "file:" + log, "--audit-mode", "blocking"});
  const std::string answers = pings(proxy, 20);
  CHECK(occurrences(answers, "HTTP/1.1 200") == 20);
  // Written before the gate is stopped: each request's two lines are in the file already.
  const auto before = lines_of(slurp(log));
  CHECK(before.size() == 40);
  proxy.terminate();
  const auto lines = lines_of(slurp(log));
  REQUIRE(lines.size() == 40);
  std::size_t decisions = 0, answered = 0;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].find("\"status\":0,") != std::string::npos) {
      ++decisions;
      // The decision's own request's answer follows it.
      REQUIRE(i + 1 < lines.size());
      const auto id = lines[i].substr(lines[i].find("\"request_id\":"), 30);
      CHECK(lines[i + 1].find(id) != std::string::npos);
      CHECK(lines[i + 1].find("\"status\":200,") != std::string::npos);
    } else if (lines[i].find("\"status\":200,") != std::string::npos) {
      ++answered;
    }
  }
  CHECK(decisions == 20);
  CHECK(answered == 20);
  const auto checked =
      run("/usr/bin/python3 " + quoted(repo_root() + "/scripts/check-audit-log.py") + " " +
          quoted(repo_root() + "/docs/audit.schema.json") + " " + quoted(log) + " 2>&1");
  INFO(checked.output);
  CHECK(checked.status == 0);
}

TEST_CASE("Blocking mode fails closed when a sink cannot be written: the daemon sees nothing",
          "[integration][audit][sinks]") {
  dir_guard d{temp_dir()};
  const std::string mnt = d.path + "/full";
  // mode=0755: a tmpfs's root is 1777 otherwise, a directory others may write.
  REQUIRE(run("mkdir -p " + mnt + " && mount -t tmpfs -o size=64k,mode=0755 tmpfs " + mnt).status ==
          0);
  struct unmount {
    std::string at;
    ~unmount() { run("umount " + at); }
  } unmount_after{mnt};
  const std::string log = mnt + "/audit.log";
  const std::string name = unique_name("dg-audit-full");
  {
    proxy_process proxy(cli_policy, {"--audit", "file:" + log, "--audit-mode", "blocking"});
    // The filesystem is full: no line can be written.
    run("dd if=/dev/zero of=" + mnt + "/filler bs=4k 2>/dev/null");
    const std::string body = R"({"Image":")" + test_image() + R"(","Cmd":["true"]})";
    const auto refused =
        raw_exchange(proxy.socket_path(),
                     "POST /v1.41/containers/create?name=" + name +
                         " HTTP/1.1\r\nHost: d\r\nContent-Type: application/json\r\n"
                         "Content-Length: " +
                         std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body);
    INFO(refused.bytes);
    CHECK(refused.status() == 503);
    CHECK(refused.bytes.find("{\"message\":\"dockgate: the audit trail cannot be written") !=
          std::string::npos);
    // Judged by the daemon's record: no such container was created.
    CHECK(!container_exists(name));
    // Space again: the next request goes through, and the lines kept meanwhile are written.
    run("rm -f " + mnt + "/filler");
    CHECK(raw_exchange(proxy.socket_path(),
                       "GET /_ping HTTP/1.1\r\nHost: d\r\nConnection: close\r\n\r\n")
              .status() == 200);
    proxy.terminate();
  }
  const auto lines = lines_of(slurp(log));
  // The refused create: its decision and its 503; the ping: decision and answer.
  REQUIRE(lines.size() == 4);
  CHECK(lines[0].find("\"operation\":\"ContainerCreate\"") != std::string::npos);
  CHECK(lines[0].find("\"status\":0,") != std::string::npos);
  CHECK(lines[1].find("\"rule\":\"audit\"") != std::string::npos);
  CHECK(lines[1].find("\"status\":503,") != std::string::npos);
  CHECK(lines[3].find("\"status\":200,") != std::string::npos);
  if (container_exists(name)) run(docker_cli() + " -H " + engine_host() + " rm -f " + name);
}

TEST_CASE("A sink that cannot be opened at start stops the gate, naming the sink",
          "[integration][audit][sinks]") {
  dir_guard d{temp_dir()};
  const std::string policy = root_owned_copy(cli_policy);
  for (const std::string& sink : {"file:" + d.path + "/no-such-dir/audit.log",
                                  std::string("journald"), "syslog:" + d.path + "/no-log.sock"}) {
    INFO(sink);
    const auto r =
        run("DOCKGATE_JOURNAL_SOCKET=" + d.path + "/no-journal.sock timeout 20 " + proxy_bin() +
            " --upstream " + engine_host() + " --listen unix://" + d.path + "/gate.sock --policy " +
            policy + " --audit stdout --audit " + quoted(sink) + " 2>&1");
    CHECK(r.status == 1);
    CHECK(r.output.find("--audit " + sink + ": cannot") != std::string::npos);
    CHECK(!exists(d.path + "/gate.sock"));  // it never listened
  }
}

// The class of a writable policy file: an audit file whose path someone else could choose
// (a directory they may write, a symlink, a file they own or may write) is refused at
// start, and the gate writes nothing through it.
TEST_CASE("A file sink someone else could redirect or edit stops the gate at start",
          "[integration][audit][sinks]") {
  dir_guard d{temp_dir()};
  const std::string policy = root_owned_copy(cli_policy);
  const std::string open_dir = d.path + "/open", target = d.path + "/target";
  REQUIRE(::mkdir(open_dir.c_str(), 0777) == 0);
  REQUIRE(::chmod(open_dir.c_str(), 0777) == 0);  // no sticky bit: anyone may rename in it
  { std::ofstream(target) << "precious\n"; }
  REQUIRE(::symlink(target.c_str(), (d.path + "/link.log").c_str()) == 0);
  { std::ofstream(d.path + "/theirs.log"); }
  REQUIRE(::chown((d.path + "/theirs.log").c_str(), 1000, 1000) == 0);
  { std::ofstream(d.path + "/shared.log"); }
  REQUIRE(::chmod((d.path + "/shared.log").c_str(), 0666) == 0);
  for (const std::string& file : {open_dir + "/audit.log", d.path + "/link.log",
                                  d.path + "/theirs.log", d.path + "/shared.log"}) {
    const std::string sink = "file:" + file;
    INFO(sink);
    const auto r =
        run("timeout 20 " + proxy_bin() + " --upstream " + engine_host() + " --listen unix://" +
            d.path + "/gate.sock --policy " + policy + " --audit " + quoted(sink) + " 2>&1");
    INFO(r.output);
    CHECK(r.status == 1);
    CHECK(r.output.find("--audit " + sink + ": cannot open") != std::string::npos);
    CHECK(!exists(d.path + "/gate.sock"));
  }
  CHECK(!exists(open_dir + "/audit.log"));
  std::ifstream in(target);
  std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(content == "precious\n");  // nothing went through the symlink
}

// Issue 39, item 9: the audit file's own directory. Its owner (or anyone who may write it)
// could unlink the trail, plant a file at PATH before a SIGHUP, or take the name a
// rotation is about to use: a directory another user owns, or others may write (sticky or
// not), is refused at start like every component above it, and nothing is created in it.
TEST_CASE("A file sink in a directory another user owns or may write stops the gate at start",
          "[integration][audit][sinks]") {
  dir_guard d{temp_dir()};
  const std::string policy = root_owned_copy(cli_policy);
  const std::string nobodys = d.path + "/nobodys", sticky = d.path + "/sticky",
                    group = d.path + "/group";
  for (const auto& [dir, mode] : {std::pair{nobodys, 0755}, {sticky, 01777}, {group, 0775}}) {
    REQUIRE(::mkdir(dir.c_str(), 0700) == 0);
    REQUIRE(::chmod(dir.c_str(), static_cast<mode_t>(mode)) == 0);
  }
  REQUIRE(::chown(nobodys.c_str(), 65534, 65534) == 0);
  const std::map<std::string, std::string> why{
      {nobodys, "is owned by uid 65534, not root"},
      {sticky, "is writable by group or others (mode 1777)"},
      {group, "is writable by group or others (mode 0775)"}};
  for (const auto& [dir, reason] : why) {
    const std::string sink = "file:" + dir + "/audit.log";
    INFO(sink);
    const auto r =
        run("timeout 20 " + proxy_bin() + " --upstream " + engine_host() + " --listen unix://" +
            d.path + "/gate.sock --policy " + policy + " --audit " + quoted(sink) + " 2>&1");
    INFO(r.output);
    CHECK(r.status == 1);
    CHECK(r.output.find("--audit " + sink + ": cannot open " + dir +
                        "/audit.log: its directory: \"" + dir + "\" " + reason) !=
          std::string::npos);
    CHECK(!exists(d.path + "/gate.sock"));
    CHECK(!exists(dir + "/audit.log"));
  }
}

// Item 9's sibling: the file removed (by root: no one else may write the directory now) and
// another user's file planted at PATH before a routine SIGHUP. The planted file is refused
// at the reopen, and the gate never writes into the removed inode (lines there reach no
// one): blocking mode refuses requests, the daemon sees nothing, and once PATH can be
// created again the lines kept meanwhile are written there.
TEST_CASE("A removed file sink with a planted file in its place is never written: blocking refuses",
          "[integration][audit][sinks][signals]") {
  dir_guard d{temp_dir()};
  const std::string log = d.path + "/audit.log";
  const std::string name = unique_name("dg-audit-planted");
  int old_inode = -1;
  {
    proxy_process proxy(cli_policy, {"--audit", "file:" + log, "--audit-mode", "blocking"});
    CHECK(occurrences(pings(proxy, 2), "HTTP/1.1 200") == 2);
    old_inode = ::open(log.c_str(), O_RDONLY | O_CLOEXEC);  // to read the removed file later
    REQUIRE(old_inode >= 0);
    REQUIRE(::unlink(log.c_str()) == 0);
    { std::ofstream(log) << "planted\n"; }
    REQUIRE(::chown(log.c_str(), 65534, 65534) == 0);
    ::kill(proxy.pid(), SIGHUP);
    for (int i = 0;
         i < 200 && occurrences(slurp(proxy.dir() + "/proxy.err"), "SIGHUP: policy") == 0; ++i)
      std::this_thread::sleep_for(25ms);
    const std::string said = slurp(proxy.dir() + "/proxy.err");
    INFO(said);
    CHECK(said.find("SIGHUP: audit sink file:" + log + ": cannot open " + log +
                    ": owned by another user (the open file was removed") != std::string::npos);
    const std::string body = R"({"Image":")" + test_image() + R"(","Cmd":["true"]})";
    const auto refused =
        raw_exchange(proxy.socket_path(),
                     "POST /v1.41/containers/create?name=" + name +
                         " HTTP/1.1\r\nHost: d\r\nContent-Type: application/json\r\n"
                         "Content-Length: " +
                         std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body);
    INFO(refused.bytes);
    CHECK(refused.status() == 503);
    CHECK(!container_exists(name));  // the daemon's record
    CHECK(slurp(log) == "planted\n");
    // PATH free again: the gate creates it, writes what it kept, and serves.
    REQUIRE(::unlink(log.c_str()) == 0);
    CHECK(raw_exchange(proxy.socket_path(),
                       "GET /_ping HTTP/1.1\r\nHost: d\r\nConnection: close\r\n\r\n")
              .status() == 200);
    proxy.terminate();
  }
  // The removed inode holds the two pings' lines (decision and answer each) and nothing
  // written after it lost its name.
  std::string removed;
  char buf[65536];
  for (ssize_t n; (n = ::read(old_inode, buf, sizeof buf)) > 0;) removed.append(buf, n);
  ::close(old_inode);
  CHECK(lines_of(removed).size() == 4);
  CHECK(removed.find("ContainerCreate") == std::string::npos);
  const auto lines = lines_of(slurp(log));
  REQUIRE(lines.size() == 4);  // the create's decision and its 503, the ping's two
  CHECK(lines[0].find("\"operation\":\"ContainerCreate\"") != std::string::npos);
  CHECK(lines[1].find("\"status\":503,") != std::string::npos);
  CHECK(lines[3].find("\"status\":200,") != std::string::npos);
  struct stat st {};
  REQUIRE(::stat(log.c_str(), &st) == 0);
  CHECK(st.st_uid == 0);
  if (container_exists(name)) run(docker_cli() + " -H " + engine_host() + " rm -f " + name);
}

// Issue 39, item 10: an audit outage shows on /metrics. A file sink on a full file system in
// batch mode keeps its lines in memory: the scrape says the sink is down and what waits;
// past its 16 MiB queue new lines are lost and counted; when space returns the queue is
// written and the sink is up. Judged by the scrape and by the file's lines.
TEST_CASE(
    "A full disk under a batch file sink shows on /metrics: down with lines pending and lost until "
    "space returns",
    "[integration][audit][sinks][metrics]") {
  dir_guard d{temp_dir()};
  const std::string mnt = d.path + "/full";
  REQUIRE(run("mkdir -p " + mnt + " && mount -t tmpfs -o size=32m,mode=0755 tmpfs " + mnt).status ==
          0);
  struct unmount {
    std::string at;
    ~unmount() { run("umount " + at); }
  } unmount_after{mnt};
  const std::string log = mnt + "/audit.log", sink = "file:" + log;
  const std::string port = free_tcp_port();
  proxy_process proxy(cli_policy, {"--audit", sink, "--metrics", "tcp://127.0.0.1:" + port});
  auto scrape = [&] { return run("curl -s http://127.0.0.1:" + port + "/metrics").output; };
  // Polls until `name` of the sink satisfies `ok` (the batch is written once a second).
  auto until = [&](const std::string& name, auto ok) {
    std::string text;
    for (int i = 0; i < 100; ++i) {
      text = scrape();
      if (ok(sink_metric(text, name, sink))) break;
      std::this_thread::sleep_for(100ms);
    }
    return text;
  };
  std::string text = scrape();
  INFO(text);
  CHECK(sink_metric(text, "dockgate_audit_sink_up", sink) == 1);
  CHECK(sink_metric(text, "dockgate_audit_sink_pending_bytes", sink) == 0);

  run("dd if=/dev/zero of=" + mnt + "/filler bs=1M 2>/dev/null");
  std::size_t answered = occurrences(pings(proxy, 5), "HTTP/1.1 200");
  CHECK(answered == 5);
  text = until("dockgate_audit_sink_up", [](long long v) { return v == 0; });
  INFO(text);
  CHECK(sink_metric(text, "dockgate_audit_sink_up", sink) == 0);
  CHECK(sink_metric(text, "dockgate_audit_sink_pending_lines", sink) == 5);
  CHECK(sink_metric(text, "dockgate_audit_sink_pending_bytes", sink) > 5 * 100);
  CHECK(sink_metric(text, "dockgate_audit_sink_write_errors_total", sink) >= 1);
  CHECK(sink_metric(text, "dockgate_audit_sink_lost_lines_total", sink) == 0);
  CHECK(slurp(log).empty());

  // Past 16 MiB kept: requests with 60 KB paths (refused: no route; a line of ~120 KB, the
  // path in its reason too), one a connection (the gate closes after such a refusal).
  const std::string long_request =
      "GET /" + std::string(60000, 'a') + " HTTP/1.1\r\nHost: d\r\nConnection: close\r\n\r\n";
  for (int c = 0; c < 180; ++c) answered += raw_exchange(proxy.socket_path(), long_request).count();
  CHECK(answered == 5 + 180);
  text = until("dockgate_audit_sink_lost_lines_total", [](long long v) { return v > 0; });
  const long long lost = sink_metric(text, "dockgate_audit_sink_lost_lines_total", sink);
  CHECK(sink_metric(text, "dockgate_audit_sink_up", sink) == 0);
  CHECK(lost > 0);
  CHECK(sink_metric(text, "dockgate_audit_sink_lost_bytes_total", sink) > lost * 60000);
  CHECK(sink_metric(text, "dockgate_audit_sink_pending_bytes", sink) > (16ll << 20));
  CHECK(sink_metric(text, "dockgate_audit_sink_pending_lines", sink) ==
        static_cast<long long>(answered) - lost);

  // Space again: the queue is written within a second or two, and the sink is up.
  run("rm -f " + mnt + "/filler");
  text = until("dockgate_audit_sink_pending_bytes", [](long long v) { return v == 0; });
  CHECK(sink_metric(text, "dockgate_audit_sink_up", sink) == 1);
  CHECK(sink_metric(text, "dockgate_audit_sink_pending_bytes", sink) == 0);
  CHECK(sink_metric(text, "dockgate_audit_sink_pending_lines", sink) == 0);
  CHECK(sink_metric(text, "dockgate_audit_sink_lost_lines_total", sink) == lost);  // a counter
  const auto lines = lines_of(slurp(log));
  CHECK(static_cast<long long>(lines.size()) == static_cast<long long>(answered) - lost);
  for (const auto& l : lines) CHECK((l.front() == '{' && l.back() == '}'));
  CHECK(slurp(proxy.dir() + "/proxy.err").find("line(s) lost in all") != std::string::npos);
  proxy.terminate();
}
