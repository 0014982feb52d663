#!/bin/sh
# The dashboard and the alerting rules name only metrics proxy/src/metrics.cpp declares
# (its "# TYPE" lines); run from the repository's root.
set -eu
types=$(mktemp)
trap 'rm -f "$types"' EXIT
grep -o '# TYPE dockgate_[a-z_]* [a-z]*' proxy/src/metrics.cpp >"$types"
/usr/bin/python3 tests/monitoring/check_exprs.py "$types" compose/monitoring/grafana-dashboard.json \
  compose/monitoring/alerts.yml
