// `dockgate-proxy learn`: files in, policy file out; the learning is policy::learn_profile.
#include "dockgate/proxy/learn_command.hpp"

#include <fstream>
#include <iostream>
#include <sstream>

#include "dockgate/policy/learn.hpp"
#include "dockgate/policy/policy_file.hpp"

namespace dockgate::proxy {

int run_learn(const learn_command& c) {
  std::vector<std::string> texts;
  for (const auto& path : c.audit_files) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
      std::cerr << "dockgate-proxy learn: " << path << ": cannot read\n";
      return 1;
    }
    std::ostringstream text;
    text << in.rdbuf();
    texts.push_back(text.str());
  }
  std::vector<std::string_view> views(texts.begin(), texts.end());
  policy::learn_options o;
  o.from_profile = c.profile;
  o.name = c.name;
  o.sources = c.audit_files;
  auto learned = policy::learn_profile(views, o);
  for (const auto& e : learned.errors) std::cerr << "dockgate-proxy learn: skipped " << e << '\n';
  for (const auto& r : learned.refused_seen)
    std::cerr << "dockgate-proxy learn: seen and refused, not learned: " << r << '\n';
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
            << learned.refused_seen.size() << " seen and refused\n";
  return 0;
}

}  // namespace dockgate::proxy
