#!/bin/sh
# Every Catch2 test name must survive catch_discover_tests: a ';' splits a name into two
# ctest entries, and a name starting with '--' reads as an option. Either way the halves
# match no test case. Usage: check_test_names.sh EXECUTABLE...
status=0
for exe in "$@"; do
  bad=$("$exe" --list-test-names-only | grep -E ';|^--') || true
  if [ -n "$bad" ]; then
    printf '%s: test names ctest cannot hold:\n%s\n' "$exe" "$bad" >&2
    status=1
  fi
done
exit $status
