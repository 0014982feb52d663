#include "dockgate/proxy/options.hpp"

#include <catch2/catch.hpp>

using namespace dockgate::proxy;

TEST_CASE("serve options parse", "[options]") {
  auto r = parse_command_line({"--upstream", "unix:///var/run/docker.sock", "--listen",
                               "unix:///run/dockgate.sock", "--listen", "tcp://127.0.0.1:2375",
                               "--policy", "p.json", "--socket-mode", "0600", "--socket-owner",
                               "0:999", "--shutdown-timeout", "3", "--threads", "4"});
  REQUIRE(std::holds_alternative<command>(r));
  auto& o = std::get<serve_options>(std::get<command>(r));
  CHECK(o.upstream.path == "/var/run/docker.sock");
  CHECK(o.listen.size() == 2);
  CHECK(o.socket_mode == 0600);
  CHECK(o.socket_uid == 0u);
  CHECK(o.socket_gid == 999u);
  CHECK(o.shutdown_timeout == std::chrono::seconds(3));
  CHECK(o.threads == 4);
}

TEST_CASE("check takes a policy", "[options]") {
  auto r = parse_command_line({"check", "--policy", "p.json"});
  REQUIRE(std::holds_alternative<command>(r));
  CHECK(std::get<check_options>(std::get<command>(r)).policy_file == "p.json");
}

TEST_CASE("bad command lines are refused", "[options]") {
  const std::vector<std::vector<std::string>> bad = {
      {},
      {"--policy", "p"},
      {"--policy", "p", "--upstream", "unix:///s"},
      {"--policy", "p", "--upstream", "http://x", "--listen", "unix:///l"},
      {"--policy", "p", "--upstream", "unix:///s", "--listen", "unix:///l", "--socket-mode", "999"},
      {"--policy", "p", "--upstream", "unix:///s", "--listen", "unix:///l", "--bogus", "1"},
      {"--policy"},
      {"check", "--policy", "p", "--listen", "unix:///l"},
      {"--policy", "p", "--upstream", "unix:///s", "--upstream", "unix:///t", "--listen",
       "unix:///l"},
      {"--policy", "p", "--policy", "q", "--upstream", "unix:///s", "--listen", "unix:///l"},
      {"--policy", "p", "--upstream", "unix:///s", "--listen", "unix:///l", "--threads", "0"},
      {"--policy", "p", "--upstream", "unix:///s", "--listen", "unix:///l", "--threads", "65"},
      {"--policy", "p", "--upstream", "unix:///s", "--listen", "unix:///l", "--threads", "2x"},
  };
  for (const auto& args : bad) {
    CAPTURE(args);
    CHECK(std::holds_alternative<parse_error>(parse_command_line(args)));
  }
}

TEST_CASE("explain and the insecure-tcp opt-in parse", "[options]") {
  auto r = parse_command_line({"explain", "--policy", "p.json", "--profile", "sandbox", "POST",
                               "/v1.41/containers/create", "body.json"});
  REQUIRE(std::holds_alternative<command>(r));
  const auto& e = std::get<explain_options>(std::get<command>(r));
  CHECK(e.profile == "sandbox");
  CHECK(e.method == "POST");
  CHECK(e.body_file == "body.json");
  CHECK(std::holds_alternative<parse_error>(
      parse_command_line({"explain", "--policy", "p.json", "GET"})));
  auto s = parse_command_line({"--upstream", "unix:///s", "--listen", "tcp://0.0.0.0:2375",
                               "--policy", "p", "--allow-insecure-tcp"});
  REQUIRE(std::holds_alternative<command>(s));
  CHECK(std::get<serve_options>(std::get<command>(s)).allow_insecure_tcp);
}

// --upstream tls:// (upstream_tls.cpp): the docker CLI's flags with an upstream- prefix,
// DOCKER_CERT_PATH's layout, and no TLS upstream without a CA to verify the daemon by.
TEST_CASE("tls:// upstreams: the CA is required, the cert path fills what is not given",
          "[options][tls]") {
  const std::vector<std::string> base = {
      "--upstream", "tls://docker-host.example:2376", "--listen", "unix:///l", "--policy", "p"};
  auto with = [&](std::vector<std::string> more) {
    auto args = base;
    args.insert(args.end(), more.begin(), more.end());
    return parse_command_line(args);
  };
  auto r = with({"--upstream-cert-path", "/etc/dockgate/up", "--upstream-tlskey", "/k.pem"});
  REQUIRE(std::holds_alternative<command>(r));
  const auto& o = std::get<serve_options>(std::get<command>(r));
  CHECK(o.upstream.scheme == dockgate::common::endpoint::kind::tls);
  CHECK(o.upstream.host == "docker-host.example");
  CHECK(o.upstream_tlscacert == "/etc/dockgate/up/ca.pem");
  CHECK(o.upstream_tlscert == "/etc/dockgate/up/cert.pem");
  CHECK(o.upstream_tlskey == "/k.pem");  // given on its own: it wins
  auto ca_only = with({"--upstream-tlscacert", "/ca.pem"});
  REQUIRE(std::holds_alternative<command>(ca_only));
  CHECK(std::get<serve_options>(std::get<command>(ca_only)).upstream_tlscert.empty());

  CHECK(std::holds_alternative<parse_error>(with({})));  // no CA: no unverified mode
  CHECK(std::holds_alternative<parse_error>(
      with({"--upstream-tlscacert", "/ca.pem", "--upstream-tlscert", "/c.pem"})));  // no key
  CHECK(std::holds_alternative<parse_error>(
      parse_command_line({"--upstream", "unix:///s", "--listen", "unix:///l", "--policy", "p",
                          "--upstream-cert-path", "/d"})));  // TLS files for a unix upstream
}

TEST_CASE("learn takes audit files, a profile, a name and an output", "[options][learn]") {
  auto r = parse_command_line({"learn", "--policy", "learn.json", "--audit", "a.log", "--audit",
                               "b.log", "--profile", "learn", "-o", "out.json"});
  REQUIRE(std::holds_alternative<command>(r));
  auto& l = std::get<learn_command>(std::get<command>(r));
  CHECK(l.policy_file == "learn.json");
  CHECK(l.audit_files == std::vector<std::string>{"a.log", "b.log"});
  CHECK(l.profile == "learn");
  CHECK(l.name == "learn");  // named after the profile it learned from
  CHECK(l.output == "out.json");
  auto named = parse_command_line({"learn", "--policy", "p", "--audit", "a.log", "--name", "ci"});
  CHECK(std::get<learn_command>(std::get<command>(named)).name == "ci");
  CHECK(std::holds_alternative<parse_error>(parse_command_line({"learn"})));
  CHECK(std::holds_alternative<parse_error>(parse_command_line({"learn", "--audit"})));
  // The recording policy is required: without it no line's profile can be judged.
  CHECK(std::holds_alternative<parse_error>(parse_command_line({"learn", "--audit", "a"})));
  CHECK(std::holds_alternative<parse_error>(
      parse_command_line({"learn", "--audit", "a", "--policy", "p", "--record"})));
  // --help is usage, not an error, wherever it stands.
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"learn", "--help"}, {"learn", "-h"}, {"learn", "--audit", "a", "--help"}}) {
    auto help = parse_command_line(args);
    REQUIRE(std::holds_alternative<command>(help));
    REQUIRE(std::holds_alternative<help_request>(std::get<command>(help)));
    CHECK(std::get<help_request>(std::get<command>(help)).text.find("dockgate-proxy learn") !=
          std::string::npos);
  }
}

TEST_CASE("audit sinks and mode parse: none given means stdout", "[options][audit]") {
  const std::vector<std::string> base = {"--upstream", "unix:///d.sock", "--listen",
                                         "unix:///g.sock"};
  auto parse = [&](std::vector<std::string> extra) {
    auto args = base;
    args.insert(args.end(), extra.begin(), extra.end());
    return parse_command_line(args);
  };
  auto plain = parse({});
  REQUIRE(std::holds_alternative<command>(plain));
  const auto& p = std::get<serve_options>(std::get<command>(plain));
  REQUIRE(p.audit.size() == 1);
  CHECK(p.audit[0].type == audit_target::kind::standard_output);
  CHECK(!p.audit_blocking);

  auto r =
      parse({"--audit", "file:/var/log/dockgate/audit.log", "--audit", "journald", "--audit",
             "syslog", "--audit", "syslog:udp://[::1]:514", "--audit", "syslog:tcp://logs:6514",
             "--audit-mode", "blocking", "--audit-max-bytes", "1000", "--audit-keep", "2"});
  REQUIRE(std::holds_alternative<command>(r));
  const auto& o = std::get<serve_options>(std::get<command>(r));
  REQUIRE(o.audit.size() == 5);
  CHECK(o.audit[0].type == audit_target::kind::file);
  CHECK(o.audit[0].path == "/var/log/dockgate/audit.log");
  CHECK(o.audit[1].type == audit_target::kind::journald);
  CHECK(o.audit[2].path == "/dev/log");
  CHECK(o.audit[3].via == audit_target::transport::udp);
  CHECK(o.audit[3].host == "::1");
  CHECK(o.audit[3].port == "514");
  CHECK(o.audit[4].via == audit_target::transport::tcp);
  CHECK(o.audit_blocking);
  CHECK(o.audit_max_bytes == 1000);
  CHECK(o.audit_keep == 2);

  for (const std::vector<std::string>& bad :
       std::vector<std::vector<std::string>>{{"--audit", "file:relative.log"},
                                             {"--audit", "syslog:udp://host"},
                                             {"--audit", "syslog:tcp://host:99999"},
                                             {"--audit", "kafka"},
                                             {"--audit-mode", "sometimes"},
                                             {"--audit-keep", "0"}}) {
    INFO(bad[0] << " " << bad[1]);
    CHECK(std::holds_alternative<parse_error>(parse(bad)));
  }
}
