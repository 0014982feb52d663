// Two readings of one body, proven absent at scale (issue 11): for generated container
// create bodies (key spellings and case folds, the deprecated top-level host config, both
// places at once, nulls, duplicate keys, nested shapes), the container dockerd stores from
// the client's own body and the one it stores from the gate's canonical body agree on every
// field the policy governs, or the gate refused the body. DOCKGATE_DIFFERENTIAL_BODIES sets
// how many (default 300; thousands for a longer run).
#include <catch2/catch.hpp>
#include <cstdlib>
#include <random>

#include "harness.hpp"

using namespace dockgate::test;

namespace {
std::string direct() {
  return docker_cli() + " -H " + engine_host();
}

struct field_choice {
  const char* name;                 // canonical name
  bool host;                        // a HostConfig field (may also be written at the top level)
  std::vector<std::string> values;  // JSON values: safe ones, then (after `safe`) widening ones
  std::size_t safe = 0;             // 0: all safe
};

const std::vector<field_choice> fields = {
    {"Memory", true, {"0", "67108864", "134217728", "null"}},
    {"MemorySwap", true, {"-1", "268435456", "null"}},
    {"CpuShares", true, {"0", "512", "1024"}},
    {"PidsLimit", true, {"null", "64", "0"}},
    {"ReadonlyRootfs", true, {"true", "false", "null"}},
    {"Privileged", true, {"false", "null", "true"}, 2},
    {"NetworkMode", true, {R"("none")", R"("default")", R"("")", R"("host")"}, 3},
    {"IpcMode", true, {R"("private")", R"("shareable")", R"("")", R"("host")"}, 3},
    {"PidMode", true, {R"("")", R"("host")"}, 1},
    {"CapDrop", true, {R"(["ALL"])", R"("ALL")", "null", "[]"}},
    {"CapAdd", true, {"null", "[]", R"(["SYS_ADMIN"])"}, 2},
    {"SecurityOpt", true, {R"(["no-new-privileges"])", "null", R"(["seccomp=unconfined"])"}, 2},
    {"ShmSize", true, {"0", "67108864"}},
    {"CpusetCpus", true, {R"("")", R"("0")"}},
    {"User", false, {R"("1000:1000")", R"("")", R"("root")"}},
    {"Tty", false, {"true", "false"}},
    {"WorkingDir", false, {R"("/tmp")", R"("")"}},
    {"Env", false, {R"(["A=1"])", "null", R"(["A=1","B=2"])"}},
};

// Spellings dockerd's decoder (Go encoding/json) reads as the same field.
std::string spelling(std::string_view name, std::mt19937& rng) {
  std::string s(name);
  switch (rng() % 5) {
    case 0:
      return s;
    case 1:
      for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      return s;
    case 2:
      for (auto& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      return s;
    case 3: {  // Unicode simple folding: K -> KELVIN SIGN, s -> LONG S
      std::string out;
      for (char c : s) {
        if (c == 'k' || c == 'K')
          out += "\xE2\x84\xAA";
        else if (c == 's' || c == 'S')
          out += "\xC5\xBF";
        else
          out += c;
      }
      return out;
    }
    default:
      for (std::size_t i = 0; i < s.size(); i += 2)
        s[i] = static_cast<char>(std::tolower(static_cast<unsigned char>(s[i])));
      return s;
  }
}

std::string generate(std::mt19937& rng) {
  std::string top = R"({"Image":")" + test_image() + R"(","Cmd":["true"])";
  std::string host;
  auto add = [](std::string& obj, const std::string& key, const std::string& value) {
    if (!obj.empty()) obj += ',';
    obj += "\"" + key + "\":" + value;
  };
  for (const auto& f : fields) {
    if (rng() % 3 == 0) continue;
    // Widening values now and then: the gate must refuse them in every spelling and place.
    const bool widen = f.safe && rng() % 20 == 0;
    const std::size_t n = f.safe ? f.safe : f.values.size();
    const std::string& value =
        widen ? f.values[f.safe + rng() % (f.values.size() - f.safe)] : f.values[rng() % n];
    const unsigned where = rng() % 10;
    if (!f.host) {
      add(top, spelling(f.name, rng), value);
    } else if (where < 6) {
      add(host, spelling(f.name, rng), value);
    } else if (where < 8) {
      add(top, spelling(f.name, rng), value);  // the deprecated top-level host config
    } else {
      add(host, spelling(f.name, rng), value);  // both places, maybe different values
      add(top, spelling(f.name, rng), f.values[rng() % n]);
    }
    if (rng() % 120 == 0)
      add(f.host ? host : top, spelling(f.name, rng), value);  // a duplicate key
  }
  if (rng() % 8 != 0)
    add(top, spelling("HostConfig", rng), "{" + host + "}");
  else if (!host.empty())
    top += "," + host;  // no HostConfig object: the top level is it
  return top + "}";
}

// The governed fields of a container as the daemon stored it.
std::string stored(const std::string& name) {
  return run(direct() +
             " inspect -f '{{json .HostConfig.Memory}} {{json .HostConfig.MemorySwap}} {{json "
             ".HostConfig.CpuShares}} "
             "{{json .HostConfig.PidsLimit}} {{json .HostConfig.ReadonlyRootfs}} {{json "
             ".HostConfig.Privileged}} "
             "{{json .HostConfig.NetworkMode}} {{json .HostConfig.IpcMode}} {{json "
             ".HostConfig.PidMode}} "
             "{{json .HostConfig.CapDrop}} {{json .HostConfig.CapAdd}} {{json "
             ".HostConfig.SecurityOpt}} "
             "{{json .HostConfig.ShmSize}} {{json .HostConfig.CpusetCpus}} {{json .Config.User}} "
             "{{json .Config.Tty}} "
             "{{json .Config.WorkingDir}} {{json .Config.Env}}' " +
             name)
      .output;
}

raw_response create(const std::string& socket, const std::string& name, const std::string& body) {
  return raw_exchange(socket, "POST /v1.41/containers/create?name=" + name +
                                  " HTTP/1.1\r\nHost: d\r\nContent-Type: "
                                  "application/json\r\nConnection: close\r\nContent-Length: " +
                                  std::to_string(body.size()) + "\r\n\r\n" + body);
}
}  // namespace

TEST_CASE(
    "differential: the daemon stores the same container from the client's body and the gate's, or "
    "the gate refused",
    "[integration][differential]") {
  // A profile that governs these fields by the default rules and changes none of the safe
  // values: what the gate forwards must mean what the client wrote.
  proxy_process proxy(
      R"({"default_profile":"d","profiles":{"d":{"confine_to_owned":false,"allow":["ContainerCreate"],)"
      R"("images":{"allow":["*"]}}}})");
  const char* env = std::getenv("DOCKGATE_DIFFERENTIAL_BODIES");
  const int bodies = env ? std::atoi(env) : 300;
  std::mt19937 rng(20261130);
  int accepted = 0, refused = 0;
  for (int i = 0; i < bodies; ++i) {
    const std::string body = generate(rng);
    const std::string a = unique_name("dg-diff-a"), b = unique_name("dg-diff-b");
    auto gated = create(proxy.socket_path(), b, body);
    if (gated.status() != 201) {
      ++refused;
      CHECK(gated.status() >= 400);
      CHECK(gated.status() < 500);
      continue;
    }
    auto straight = create(engine_socket(), a, body);
    INFO(body << "\nstraight: " << straight.bytes.substr(0, 300)
              << "\ngated: " << gated.bytes.substr(0, 300));
    CHECK(straight.status() == 201);  // the gate never accepts what the daemon refuses
    if (straight.status() == 201) CHECK(stored(a) == stored(b));
    ++accepted;
    run(direct() + " rm -f " + a + " " + b + " >/dev/null 2>&1");
  }
  INFO("accepted " << accepted << ", refused " << refused);
  CHECK(accepted > bodies / 10);  // the generator exercises the accepting path too
  CHECK(refused > 0);
}
