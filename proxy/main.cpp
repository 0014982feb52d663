// dockgate-proxy: the Docker API gate. See `dockgate-proxy --help`.
#include <fstream>
#include <iostream>
#include <sstream>

#include "dockgate/client/healthcheck.hpp"
#include "dockgate/common/environment.hpp"
#include "dockgate/common/host_path.hpp"
#include "dockgate/policy/policy_file.hpp"
#include "dockgate/policy/tecnativa.hpp"
#include "dockgate/proxy/explain.hpp"
#include "dockgate/proxy/learn_command.hpp"
#include "dockgate/proxy/options.hpp"
#include "dockgate/proxy/server.hpp"

namespace {

// The policy file (read only if root controls it: a user who could replace it could
// choose the gate's profile), or, without one, the Tecnativa docker-socket-proxy variables of the
// environment (CONTAINERS=1, POST=0, ...) as an equivalent profile.
std::optional<dockgate::policy::policy> load_policy(const std::string& path) {
  if (path.empty()) {
    auto result = dockgate::policy::tecnativa_policy(dockgate::common::process_environment());
    for (const auto& e : result.errors) std::cerr << "dockgate-proxy: " << e << '\n';
    return std::move(result.value);
  }
  // Only a file no one but root (or the gate's own user) can change (host_path.hpp).
  auto text = dockgate::common::read_root_controlled_file(path);
  if (!text) {
    std::cerr << "dockgate-proxy: --policy: refused: " << text.error << '\n';
    return std::nullopt;
  }
  auto result = dockgate::policy::parse_policy(text.bytes);
  for (const auto& e : result.errors) std::cerr << path << ": " << e << '\n';
  return std::move(result.value);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace dockgate::proxy;
  std::vector<std::string> args(argv + 1, argv + argc);
  // The probe of a container's HEALTHCHECK: GET /healthz on the --metrics listener.
  if (args.size() == 2 && args[0] == "healthcheck") return dockgate::client::healthcheck(args[1]);
  auto parsed = parse_command_line(args);
  if (auto* err = std::get_if<parse_error>(&parsed)) {
    std::cerr << "dockgate-proxy: " << err->message << "\n\n" << usage();
    return 2;
  }
  auto& cmd = std::get<command>(parsed);
  if (auto* help = std::get_if<help_request>(&cmd)) {
    std::cout << help->text;
    return 0;
  }
  if (auto* check = std::get_if<check_options>(&cmd)) {
    auto pol = load_policy(check->policy_file);
    if (!pol) return 1;
    std::cout << (check->policy_file.empty() ? std::string("Tecnativa variables")
                                             : check->policy_file)
              << ": OK, " << pol->profiles.size() << " profile(s), " << pol->clients.size()
              << " client rule(s), default "
              << (pol->default_profile ? pol->default_().name : std::string("none")) << '\n';
    return 0;
  }
  if (auto* learn = std::get_if<learn_command>(&cmd)) return run_learn(*learn);
  if (auto* ex = std::get_if<explain_options>(&cmd)) {
    auto pol = load_policy(ex->policy_file);
    if (!pol) return 2;
    const dockgate::policy::profile* prof =
        ex->profile.empty() ? (pol->default_profile ? &pol->default_() : nullptr)
                            : pol->find(ex->profile);
    if (!prof) {
      std::cerr << "dockgate-proxy explain: no profile "
                << (ex->profile.empty() ? "(no default)" : ex->profile) << '\n';
      return 2;
    }
    std::optional<std::string> body;
    if (!ex->body_file.empty()) {
      std::ifstream in(ex->body_file, std::ios::binary);
      if (!in) {
        std::cerr << ex->body_file << ": cannot read\n";
        return 2;
      }
      std::ostringstream text;
      text << in.rdbuf();
      body = text.str();
    }
    auto e = explain_request(*prof, ex->method, ex->target, body);
    std::cout << e.text;
    return e.exit_status;
  }
  const auto& opts = std::get<serve_options>(cmd);
  auto pol = load_policy(opts.policy_file);
  if (!pol) return 1;
  try {
    return serve(opts, std::move(*pol), [&opts] { return load_policy(opts.policy_file); });
  } catch (const std::exception& e) {
    std::cerr << "dockgate-proxy: " << e.what() << '\n';
    return 1;
  }
}
