// Kernel sessions' decisions (kernel.hpp): the kernel names a session may ask for, the
// driver's hello and status frames (untrusted: parsed strictly), the answer's `kernel`
// object, the cell request's framing.
#include "cells/kernel.hpp"

#include <catch2/catch.hpp>

#include "front/aivory/cell_answers.hpp"

using namespace dockgate::sidecar;
using dockgate::sidecar::aivory::kernel_json;

TEST_CASE("kernel names: python (and Jupyter's python3) only", "[sidecar][kernel]") {
  CHECK(kernel_name("python") == "python");
  CHECK(kernel_name("python3") == "python");
  for (std::string_view bad : {"", "Python", "python2", "ruby", "ir", " python", "python\n"}) {
    INFO(bad);
    CHECK_FALSE(kernel_name(bad));
  }
}

TEST_CASE("kernel hello: the driver's PID and state or nothing", "[sidecar][kernel]") {
  using st = kernel_hello::state;
  CHECK(parse_kernel_hello("dockgate-kernel 1 42 ready") == kernel_hello{42, st::ready});
  CHECK(parse_kernel_hello("dockgate-kernel 1 7 missing") == kernel_hello{7, st::missing});
  CHECK(parse_kernel_hello("dockgate-kernel 1 7 failed") == kernel_hello{7, st::failed});
  for (std::string_view bad :
       {"dockgate-kernel 1 42", "dockgate-kernel 1 42 ready ", "dockgate-kernel 2 42 ready",
        "dockgate-runner 2 42", "dockgate-kernel 1 042 ready", "dockgate-kernel 1 0 ready",
        "dockgate-kernel 1 -1 ready", "dockgate-kernel 1 +1 ready", "dockgate-kernel 1 42 READY",
        "dockgate-kernel 1 99999999999 ready", "dockgate-kernel 1  42 ready", ""}) {
    INFO(bad);
    CHECK_FALSE(parse_kernel_hello(bad));
  }
}

TEST_CASE("kernel status: restarted died count, three plain words", "[sidecar][kernel]") {
  CHECK(parse_kernel_status("0 0 1") == kernel_status{false, false, 1});
  CHECK(parse_kernel_status("1 0 0") == kernel_status{true, false, 0});
  CHECK(parse_kernel_status("0 1 12") == kernel_status{false, true, 12});
  for (std::string_view bad : {"", "0 0", "0 0 1 ", " 0 0 1", "0  0 1", "2 0 1", "0 0 -1", "0 0 01",
                               "0 0 x", "true false 1", "0 0 1 1", "0\t0 1"}) {
    INFO(bad);
    CHECK_FALSE(parse_kernel_status(bad));
  }
}

TEST_CASE("kernel json: the answer's kernel object", "[sidecar][kernel]") {
  CHECK(kernel_json("python", {false, false, 3}) ==
        R"({"name":"python","restarted":false,"execution_count":3})");
  CHECK(kernel_json("python", {true, false, 0}) ==
        R"({"name":"python","restarted":true,"execution_count":0})");
}

TEST_CASE("kernel cell request: the runner's framing, op K, three lists", "[sidecar][kernel]") {
  CHECK(kernel_cell_request("x = 1", 1500, 2000, "/workspace/outputs", 65536) ==
        runner_request('K', 65536, {{"x = 1"}, {"1500", "2000"}, {"/workspace/outputs"}}));
  // The driver's status frame is a kind of its own (the runner never sends one: for it
  // the frame is unexpected, cells.cpp).
  runner_frames f;
  f.feed(
      std::string("K\0\0\0\x05"
                  "0 0 1",
                  10));
  auto got = f.next();
  REQUIRE(got);
  CHECK(got->type == runner_frames::kind::status);
  CHECK(got->payload == "0 0 1");
}
