// The fleet's own credential on a forwarded call (sidecar/src/fleet/fleet_auth.hpp): accepted
// only for the call it signs, addressed to this instance, from the member that sent it,
// once, within the clock window, under the fleet's key.
#include "fleet/fleet_auth.hpp"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "dockgate/sidecar/config.hpp"
#include "fleet/forward.hpp"
#include "fleet/sealed.hpp"

using namespace dockgate::sidecar;

namespace {
const std::string key = "0123456789abcdef0123456789abcdef";
const std::string nonce = "00112233445566778899aabbccddeeff";
}  // namespace

TEST_CASE(
    "fleet credential: a member's signature is accepted once, for that call and receiver only",
    "[fleet]") {
  const std::int64_t now = 1'800'000'000;
  const std::string sig = fleet_signature(key, "a", "b", now, nonce, "POST", "/exec", "{\"x\":1}");
  {
    fleet_verifier b(key, "b");
    CHECK_FALSE(b.check(sig, "a", "POST", "/exec", "{\"x\":1}", now + 10).has_value());
    // The same signature again: a replay.
    auto again = b.check(sig, "a", "POST", "/exec", "{\"x\":1}", now + 11);
    REQUIRE(again);
    CHECK(again->find("used before") != std::string::npos);
  }
  fleet_verifier b(key, "b");
  auto refused = [&](fleet_verifier& v, const std::string& header, const std::string& from,
                     const std::string& method, const std::string& path, const std::string& body,
                     std::int64_t at) { return v.check(header, from, method, path, body, at); };
  // Another body, path, method, sender or receiver: refused.
  CHECK(refused(b, sig, "a", "POST", "/exec", "{\"x\":2}", now));
  CHECK(refused(b, sig, "a", "POST", "/files", "{\"x\":1}", now));
  CHECK(refused(b, sig, "a", "GET", "/exec", "{\"x\":1}", now));
  CHECK(refused(b, sig, "c", "POST", "/exec", "{\"x\":1}", now));
  CHECK(refused(b, sig, "", "POST", "/exec", "{\"x\":1}", now));
  fleet_verifier c(key, "c");
  CHECK(refused(c, sig, "a", "POST", "/exec", "{\"x\":1}", now));
  // Outside the clock window, either way.
  CHECK(refused(b, sig, "a", "POST", "/exec", "{\"x\":1}", now + fleet_clock_skew_s + 1));
  CHECK(refused(b, sig, "a", "POST", "/exec", "{\"x\":1}", now - fleet_clock_skew_s - 1));
  // Another key, no key, no header, a client's bearer in its place, a bare header.
  fleet_verifier wrong("another-fleet-key-another-fleet-key", "b");
  CHECK(refused(wrong, sig, "a", "POST", "/exec", "{\"x\":1}", now));
  fleet_verifier keyless("", "b");
  CHECK(refused(keyless, sig, "a", "POST", "/exec", "{\"x\":1}", now));
  CHECK(refused(b, "", "a", "POST", "/exec", "{\"x\":1}", now));
  CHECK(refused(b, "Bearer test-key-0123456789", "a", "POST", "/exec", "{\"x\":1}", now));
  CHECK(refused(b, "v1 a b 1800000000 " + nonce + " " + std::string(64, '0'), "a", "POST", "/exec",
                "{\"x\":1}", now));
  // Still valid for its own call after all those refusals (none consumed its nonce).
  CHECK_FALSE(b.check(sig, "a", "POST", "/exec", "{\"x\":1}", now).has_value());
}

TEST_CASE("fleet configuration: members are listed by the operator, and a fleet needs its key",
          "[fleet]") {
  const std::string dir = "/tmp/dockgate-fleet-auth-test-" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/key") << key << "\n";
  std::ofstream(dir + "/short") << "secret\n";
  std::map<std::string, std::string> env = {
      {"SANDBOX_API_KEY", "k"},
      {"SANDBOX_WORKSPACE_MODE", "fuse"},
      {"AIMEM_BUCKET", "b"},
      {"AIMEM_ENDPOINT", "http://127.0.0.1:9000"},
      {"SANDBOX_FLEET_URL", "http://127.0.0.1:8001"},
      {"SANDBOX_FLEET_KEY_FILE", dir + "/key"},
      {"SANDBOX_FLEET_MEMBERS", "a=http://127.0.0.1:8001, b=http://10.0.0.2:8000/"}};
  auto ok = load_config(env);
  INFO((ok.errors.empty() ? "" : ok.errors[0]));
  REQUIRE(ok.value);
  CHECK(ok.value->fleet_key == key);  // the trailing newline is not part of it
  CHECK(ok.value->fleet_members ==
        std::map<std::string, std::string>{{"a", "http://127.0.0.1:8001"},
                                           {"b", "http://10.0.0.2:8000"}});
  auto with = [&](std::string name, std::string value) {
    auto e = env;
    if (value.empty())
      e.erase(name);
    else
      e[name] = value;
    return load_config(e);
  };
  CHECK_FALSE(with("SANDBOX_FLEET_KEY_FILE", "").value);  // a fleet without its key
  CHECK_FALSE(with("SANDBOX_FLEET_KEY_FILE", dir + "/short").value);
  CHECK_FALSE(with("SANDBOX_FLEET_KEY_FILE", dir + "/none").value);
  CHECK_FALSE(with("SANDBOX_FLEET_MEMBERS", "b=https://10.0.0.2:8000").value);
  CHECK_FALSE(with("SANDBOX_FLEET_MEMBERS", "http://10.0.0.2:8000").value);
  CHECK_FALSE(with("SANDBOX_FLEET_MEMBERS", "a=http://h:1,a=http://h:2").value);
  std::filesystem::remove_all(dir);
}

TEST_CASE(
    "fleet sealed facts: open under the fleet's key for the same session only, and never once "
    "changed",
    "[fleet]") {
  const std::string fk = "fleet-secret-0123456789abcdef";
  const std::string facts = R"({"env":["API_KEY=s3cr3t"],"entrypoint":["sleep","1"]})";
  const std::string sealed = seal(fk, "sid-a", facts);
  REQUIRE(sealed.starts_with("v1:"));
  CHECK(sealed.find("s3cr3t") == std::string::npos);
  CHECK(sealed.find("sleep") == std::string::npos);
  CHECK(unseal(fk, "sid-a", sealed) == facts);
  CHECK(seal(fk, "sid-a", facts) != sealed);       // a new nonce each time
  CHECK_FALSE(unseal(fk + "x", "sid-a", sealed));  // another fleet
  CHECK_FALSE(unseal(fk, "sid-b", sealed));        // moved onto another session's record
  std::string changed = sealed;
  changed[10] = changed[10] == '0' ? '1' : '0';
  CHECK_FALSE(unseal(fk, "sid-a", changed));
  CHECK_FALSE(unseal(fk, "sid-a", sealed.substr(0, sealed.size() - 2)));
  CHECK_FALSE(unseal(fk, "sid-a", "v1:zz"));
  CHECK_FALSE(unseal(fk, "sid-a", facts));
  CHECK(unseal(fk, "sid-a", seal(fk, "sid-a", "")) == "");
}

TEST_CASE(
    "fleet hop: a client's Range and request id travel, none of its credentials, and the "
    "holder's Content-Range and log cursor come back",
    "[fleet]") {
  for (const char* kept : {"range", "x-request-id", "if-range"}) CHECK(forwardable_field(kept));
  for (const char* credential :
       {"authorization", "open-sandbox-api-key", "x-execd-access-token", "cookie", "host",
        "x-dockgate-fleet", "x-dockgate-forwarded", "content-length", "transfer-encoding"})
    CHECK_FALSE(forwardable_field(credential));
  for (const char* back : {"content-range", "execd-commands-tail-cursor", "x-request-id",
                           "content-disposition", "accept-ranges"})
    CHECK(returnable_field(back));
  for (const char* not_back : {"set-cookie", "connection", "content-length", "transfer-encoding"})
    CHECK_FALSE(returnable_field(not_back));
}
