#!/usr/bin/env bash
# Runs every dockgate test: unit tests, then integration tests against a private
# Docker engine and registry (scripts/engine.sh) and s3rver (scripts/s3rver.sh, from
# npm) that this script starts and stops, with the Node.js Docker clients of
# scripts/node-clients.sh (dockerode, testcontainers, the Dev Containers CLI, from npm, cached); then the
# compose stacks (tests/stack), the Debian package (tests/package) and the first-run
# command (tests/first_run) with the release programs; the benchmarks once, small, as
# smoke tests; the fleet of three hosts once (scripts/fleet.sh smoke).
# Needs root: it installs Debian packages and starts dockerd.
#
#   scripts/test.sh [ctest arguments...]
#
# The suite runs once, on the asan-ubsan build: AddressSanitizer and UBSan in every unit
# test, every fuzz corpus replay and every integration test, and in the gate, the sidecar
# and the mount program those tests start. Two tests need a build without ASan and run on
# the dev build instead: the allocation counts (the LD_PRELOADed counter cannot come before
# ASan's runtime, and ASan's allocator is not the one that ships) and the memory of held
# streams (ASan's shadow and redzones are not what a stream costs); the dev build makes
# only what they need. Then the gate's integration tests once more under ThreadSanitizer
# (the tsan build of the proxy, with its threads: a race it reports fails the run).
# DOCKGATE_SANITIZERS=0 runs the whole suite on the dev build instead, with no sanitizer
# pass (quicker to build, for a local run; CI runs with them).
# The tests tagged [userns] run once more on an engine with userns-remap.
# Each stage's time is printed as it ends ("test.sh: <stage> took N s").
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ $(id -u) -ne 0 ]]; then
  echo "scripts/test.sh: run as root (it installs packages and starts a private dockerd)" >&2
  exit 1
fi

# stage NAME COMMAND...: runs a stage and prints how long it took (the budget is CI's).
stage() {
  local name=$1 started=$SECONDS
  shift
  "$@"
  echo "test.sh: $name took $((SECONDS - started)) s"
}

stage packages scripts/install-deps.sh
# The code's shape, before anything is built: every C++ file as .clang-format writes it,
# and the sidecar's rooms as docs/design.md draws them (the include floors, no HTTP type
# below the fronts, no function over 80 lines, no folder over 15 files).
layout() {
  scripts/check-format.sh
  python3 scripts/check-rooms.py
}
stage "code layout" layout
# promtool, for the alerting rules' tests only (tests/monitoring): Debian ships it only in
# the prometheus package, whose postinst enables and starts a Prometheus server where
# systemd runs. Not in install-deps.sh, which scripts/run.sh also runs on a user's machine;
# installed here, and a server it started is stopped and disabled (one the machine had
# before is left as it was).
if ! command -v promtool >/dev/null; then
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends prometheus
  if [ -d /run/systemd/system ]; then systemctl disable --now prometheus.service >/dev/null 2>&1 || true; fi
fi
sanitizers=${DOCKGATE_SANITIZERS:-1}
# The allocation counts and the memory of held streams, the tests a sanitizer build cannot
# run, are the binary proxy_measure_test, labelled `measure`.
build() {
  cmake --preset dev >/dev/null
  if [[ $sanitizers == 1 ]]; then
    # Only what the measurements need: their binary, the gate and the allocation counter
    # (not the whole suite and the sidecar a second time).
    cmake --build --preset dev --target proxy_measure_test
  else
    cmake --build --preset dev
  fi
  # The shipped programs, optimised: the images, the Debian package and the first run use them.
  cmake --preset release >/dev/null
  cmake --build --preset release --target dockgate-proxy dockgate-sidecar dockgate-mount
  if [[ $sanitizers == 1 ]]; then
    cmake --preset asan-ubsan >/dev/null
    cmake --build --preset asan-ubsan
    cmake --preset tsan >/dev/null
    # Only the gate: the tsan pass runs the asan build's test binary against it.
    cmake --build --preset tsan --target dockgate-proxy
  fi
}
stage build build

engine_dir=$(mktemp -d /tmp/dockgate-engine.XXXXXX)
s3_dir=$(mktemp -d /tmp/dockgate-s3.XXXXXX)
node_dir=$(mktemp -d /tmp/dockgate-node.XXXXXX)
trap 'scripts/engine.sh stop "$engine_dir" || true; scripts/s3rver.sh stop "$s3_dir" || true; rm -rf "$node_dir"' EXIT
services() {
  scripts/engine.sh start "$engine_dir"
  scripts/s3rver.sh start "$s3_dir"
  scripts/node-clients.sh "$node_dir"
  # The full session image (the data stack) for the notebook-style test and the first run:
  # built once per machine (cached in /var/cache/dockgate), imported here.
  # shellcheck disable=SC1091
  (source "$engine_dir/env" &&
    scripts/runtime-image.sh "$DOCKGATE_TEST_ENGINE" dockgate/sandbox-runtime:full --full)
}
stage services services
# shellcheck disable=SC1091
source "$engine_dir/env"
# shellcheck disable=SC1091
source "$s3_dir/env"
# shellcheck disable=SC1091
source "$node_dir/env"
export DOCKGATE_TEST_FULL_RUNTIME_IMAGE=dockgate/sandbox-runtime:full
# gVisor (runsc, from install-deps.sh) is tested here, never skipped: a run without it on
# the private engine fails now, and DOCKGATE_REQUIRE_RUNSC makes a [runsc] test fail, not
# skip, where it finds none.
if [[ ${DOCKGATE_TEST_RUNSC:-0} != 1 ]]; then
  echo "scripts/test.sh: runsc is not registered on the private engine (install-deps.sh installs Debian's runsc)" >&2
  exit 1
fi
export DOCKGATE_REQUIRE_RUNSC=1

if [[ $sanitizers == 1 ]]; then
  # Every test once, under ASan and UBSan, but the two that cannot run there.
  stage "ctest (asan-ubsan)" ctest --preset asan-ubsan --output-on-failure -LE measure "$@"
  if [[ $# -eq 0 ]]; then
    stage "ctest (dev: allocations, memory)" ctest --preset dev --output-on-failure -L measure
  fi
else
  stage "ctest (dev)" ctest --preset dev --output-on-failure "$@"
fi
# userns-remap, the engine setting docs/security.md recommends ("User namespaces"): the
# integration tests tagged [userns] (the sandbox's walls and seccomp, a session's cells,
# files and archives, a FUSE workspace, an adopted session's sweep) once more on a second
# private engine that maps the containers' ids to the dockremap user's subordinate range.
userns_pass() {
  local dir rc=0 bin=build/asan-ubsan/tests/integration/proxy_integration_test
  [[ $sanitizers == 1 ]] || bin=build/dev/tests/integration/proxy_integration_test
  dir=$(mktemp -d /tmp/dockgate-userns.XXXXXX)
  chmod 0711 "$dir"  # the remapped root must reach the data root below it (dockerd checks)
  if DOCKGATE_DOCKERD_ARGS=--userns-remap=default scripts/engine.sh start "$dir"; then
    # shellcheck disable=SC1091
    (source "$dir/env" && DOCKGATE_MOUNT_USERNS=dockremap "$bin" "[userns]") || rc=$?
  else
    rc=1
  fi
  scripts/engine.sh stop "$dir" || true
  rm -rf "$dir"
  return $rc
}
if [[ $# -eq 0 ]]; then
  stage "userns-remap" userns_pass
fi
# What ships: the images and compose stacks, and the Debian package (once, not per build).
if [[ $# -eq 0 ]]; then
  stage "compose stacks" tests/stack/compose_stack_test.sh
  # engine.sh and fleet.sh beside a host's dockerd (FORWARD DROP, br_netfilter), made in a
  # network namespace of the test's own.
  stage "beside a host's dockerd" tests/stack/beside_host_docker_test.sh
  stage "Debian package" tests/package/deb_test.sh
  stage "first run" tests/first_run/first_run_test.sh
  # The benchmarks as smoke tests: they complete and print their numbers (no ratio is
  # judged here; see README, Benchmarks).
  stage "bench smoke" scripts/bench.sh --smoke
  stage "sidecar bench smoke" scripts/bench-sidecar.sh --smoke
  # The fleet on one machine (three hosts, HAProxy, one host killed): every session answers
  # again with its files, and nothing is left behind (scripts/fleet.sh; README, A fleet).
  stage "fleet smoke" scripts/fleet.sh smoke
fi
tsan_pass() {
  # The gate's tests (not the sidecar's, which has threads of its own and its own suite
  # above) against the tsan build of dockgate-proxy (DOCKGATE_TEST_PROXY_BIN: the test
  # binary is the asan build's, the gate it starts the tsan build's), run with its default
  # threads (one per CPU). TSan writes a report per process that saw a race; any report
  # fails the run. Left out as under ASan: the allocation counts and the memory of held
  # streams.
  local tsan_reports spec= tag
  tsan_reports=$(mktemp -d /tmp/dockgate-tsan.XXXXXX)
  for tag in server signals metrics shutdown limits upstream version listener tls audit sinks \
    http stream hijack attack ownership cli clients transparency policy operator; do
    spec+="${spec:+,}[$tag]~[sidecar]~[alloc]~[memory]"
  done
  DOCKGATE_TEST_PROXY_BIN=$PWD/build/tsan/proxy/dockgate-proxy TSAN_OPTIONS="log_path=$tsan_reports/report" \
    build/asan-ubsan/tests/integration/proxy_integration_test "$spec"
  if compgen -G "$tsan_reports/report*" >/dev/null; then
    cat "$tsan_reports"/report*
    echo "scripts/test.sh: ThreadSanitizer reported a race (above)" >&2
    return 1
  fi
  rm -rf "$tsan_reports"
}
if [[ $sanitizers == 1 && $# -eq 0 ]]; then
  stage "tsan" tsan_pass
fi
