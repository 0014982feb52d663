// `dockgate-proxy learn`: files in, policy file out; the learning is policy::learn_profile.
//
// Invariant: a learn that read no line it could trust writes nothing and fails (exit 1),
// so a forged or foreign log cannot quietly produce a policy; every line refused as no
// record the gate could have written is named on stderr with its file, number and why.
#include "dockgate/proxy/learn_command.hpp"

#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>

#include "dockgate/policy/learn.hpp"
#include "dockgate/policy/policy_file.hpp"

namespace dockgate::proxy {

namespace {

std::optional<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

int run_learn(const learn_command& c) {
  // The policy the gate recorded under: which profiles exist, what each could allow.
  auto policy_text = read_file(c.policy_file);
  if (!policy_text) {
    std::cerr << "dockgate-proxy learn: --policy " << c.policy_file << ": cannot read\n";
    return 1;
  }
  auto recorded = policy::parse_policy(*policy_text);
  if (!recorded.value) {
    for (const auto& e : recorded.errors)
      std::cerr << "dockgate-proxy learn: --policy " << c.policy_file << ": " << e << '\n';
    return 1;
  }
  if (!c.profile.empty() && !recorded.value->find(c.profile)) {
    std::cerr << "dockgate-proxy learn: --profile " << c.profile << ": not a profile of "
              << c.policy_file << '\n';
    return 1;
  }
  std::vector<std::string> texts;
  for (const auto& path : c.audit_files) {
    auto text = read_file(path);
    if (!text) {
      std::cerr << "dockgate-proxy learn: " << path << ": cannot read\n";
      return 1;
    }
    texts.push_back(std::move(*text));
  }
  std::vector<std::string_view> views(texts.begin(), texts.end());
  policy::learn_options o;
  o.from_profile = c.profile;
  o.name = c.name;
  o.sources = c.audit_files;
  o.recorded = &*recorded.value;
  auto learned = policy::learn_profile(views, o);
  for (const auto& e : learned.errors)
    std::cerr << "dockgate-proxy learn: refused line " << e << '\n';
  for (const auto& r : learned.refused_seen)
    std::cerr << "dockgate-proxy learn: seen and refused, not learned: " << r << '\n';
  for (const auto& p : learned.unrecorded_profiles)
    std::cerr << "dockgate-proxy learn: profile " << p
              << " was recorded without \"record\": \"fields\""
              << (learned.unrecorded_bodies
                      ? ": " + std::to_string(learned.unrecorded_bodies) +
                            " create/exec line(s) carry no \"seen\", so no body rule (allow lists, "
                            "clamps, binds) was learned"
                      : std::string(": no body rule can be learned from its lines"))
              << "; record the client under compose/policies/learn.json (or add \"record\": "
                 "\"fields\" to its profile) and learn again\n";
  if (learned.lines_learned == 0) {
    std::cerr << "dockgate-proxy learn: nothing valid was learned (0 of " << learned.lines_read
              << " audit lines" << (c.profile.empty() ? "" : " of profile " + c.profile)
              << "): no policy written\n";
    return 1;
  }
  // What is written must load: the same parser as --policy and check.
  auto parsed = policy::parse_policy(learned.policy);
  if (!parsed.value) {
    for (const auto& e : parsed.errors)
      std::cerr << "dockgate-proxy learn: result invalid: " << e << '\n';
    std::cerr << learned.policy;
    return 1;
  }
  if (c.output.empty()) {
    std::cout << learned.policy;
  } else {
    std::ofstream out(c.output, std::ios::binary | std::ios::trunc);
    if (!(out << learned.policy) || !out.flush()) {
      std::cerr << "dockgate-proxy learn: " << c.output << ": cannot write\n";
      return 1;
    }
  }
  std::cerr << "dockgate-proxy learn: profile " << c.name << " from " << learned.lines_learned
            << " of " << learned.lines_read << " audit lines, "
            << parsed.value->profiles.front().allowed.count() << " operation(s), "
            << learned.refused_seen.size() << " seen and refused, " << learned.errors.size()
            << " line(s) refused\n";
  return 0;
}

}  // namespace dockgate::proxy
