// Google Benchmark: canonicalising and rewriting the body the docker CLI sends for
// `docker run` (tests/policy/data/docker_cli_run.json), under the shipped policies.
#include <benchmark/benchmark.h>

#include <fstream>
#include <memory>
#include <sstream>

#include "dockgate/policy/body_review.hpp"
#include "dockgate/policy/go_json.hpp"

using namespace dockgate::policy;

namespace {
std::string read_file(const std::string& path) {
  std::ifstream in(std::string(DOCKGATE_SOURCE_DIR) + "/" + path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

const std::string& run_body() {
  static const std::string body = read_file("tests/policy/data/docker_cli_run.json");
  return body;
}

const profile& load(const char* file) {
  static std::vector<std::unique_ptr<policy>> keep;
  keep.push_back(std::make_unique<policy>(*parse_policy(read_file(file)).value));
  return keep.back()->default_();
}

void decode_only(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(decode_body(run_body(), schema::container_create));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * run_body().size()));
}
BENCHMARK(decode_only);

void review_docker_cli(benchmark::State& state) {
  static const profile& p = load("compose/policies/docker-cli.json");
  for (auto _ : state) benchmark::DoNotOptimize(review_container_create(p, run_body()));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * run_body().size()));
}
BENCHMARK(review_docker_cli);

void review_sandbox(benchmark::State& state) {
  static const profile& p = load("compose/policies/sandbox.json");
  for (auto _ : state) benchmark::DoNotOptimize(review_container_create(p, run_body()));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * run_body().size()));
}
BENCHMARK(review_sandbox);
}  // namespace

BENCHMARK_MAIN();
