#!/usr/bin/env python3
"""Checks that the Grafana dashboard and the alerting rules ask only for what the gate exports.

Usage: check_exprs.py SCRAPE DASHBOARD.json ALERTS.yml

SCRAPE is a /metrics answer of a running gate. Every PromQL expression of the dashboard
(panel targets, template queries) and of the rules is parsed down to the metric names it
selects; each must be one the scrape declares (# TYPE, with a histogram's _bucket/_sum/_count)
or Prometheus' own `up`. The dashboard's expressions, with Grafana's variables filled in, must
also pass `promtool check rules` (the rules file itself is checked by the promtool ctest).
Exits 1 with every problem listed.
"""
import json
import os
import re
import subprocess
import sys
import tempfile

import yaml

# PromQL's words that are not metric names: aggregations, functions, keywords.
KEYWORDS = {
    "and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring",
    "group_left", "group_right", "inf", "nan", "atan2",
}
FUNCTIONS = {
    "sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values",
    "bottomk", "topk", "quantile", "abs", "absent", "absent_over_time", "ceil", "changes",
    "clamp", "clamp_max", "clamp_min", "day_of_month", "day_of_week", "day_of_year",
    "days_in_month", "delta", "deriv", "exp", "floor", "histogram_quantile", "holt_winters",
    "hour", "idelta", "increase", "irate", "label_join", "label_replace", "ln", "log2",
    "log10", "minute", "month", "predict_linear", "rate", "resets", "round", "scalar", "sgn",
    "sort", "sort_desc", "sqrt", "time", "timestamp", "vector", "year", "avg_over_time",
    "min_over_time", "max_over_time", "sum_over_time", "count_over_time",
    "quantile_over_time", "stddev_over_time", "stdvar_over_time", "last_over_time",
    "present_over_time", "label_values",
}
PROMETHEUS_OWN = {"up"}


def exported(scrape):
    names = set()
    for line in scrape.splitlines():
        m = re.match(r"# TYPE (\S+) (\S+)", line)
        if m:
            names.add(m.group(1))
            if m.group(2) in ("histogram", "summary"):
                names |= {m.group(1) + s for s in ("_bucket", "_sum", "_count")}
    return names


def grafana_filled(expr):
    """The expression as Prometheus would get it from Grafana."""
    expr = expr.replace("$__rate_interval", "5m").replace("$__interval", "1m").replace("$__range", "1h")
    return re.sub(r"\$\{?(\w+)\}?", ".*", expr)


def metric_names(expr):
    """The metric names an expression selects, and the words it calls that PromQL lacks."""
    e = re.sub(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'', '""', expr)  # strings
    e = re.sub(r"\{[^}]*\}", " ", e)  # label matchers
    e = re.sub(r"\[[^\]]*\]", " ", e)  # ranges and subqueries
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", e)  # label lists
    e = re.sub(r"\$\{?\w+\}?", " ", e)  # Grafana variables
    e = re.sub(r"\blabel_values\s*\(([^,()]*),\s*\w+\s*\)", r"(\1)", e)  # Grafana's: (metric, label)
    names, unknown = set(), set()
    for m in re.finditer(r"(?<![\w.:])([A-Za-z_:][\w:]*)(\s*\()?", e):
        word, call = m.group(1), m.group(2)
        if word.lower() in KEYWORDS:
            continue
        if call:
            if word not in FUNCTIONS:
                unknown.add(word)
            continue
        names.add(word)
    return names, unknown


def dashboard_exprs(dash):
    out = []

    def walk(panels):
        for p in panels:
            walk(p.get("panels", []))
            if p.get("type") == "row":
                continue
            targets = [t for t in p.get("targets", []) if t.get("expr")]
            if not targets:
                out.append((f"panel {p.get('title')!r}", None))
            for t in targets:
                out.append((f"panel {p.get('title')!r} target {t.get('refId')}", t["expr"]))

    walk(dash.get("panels", []))
    for v in dash.get("templating", {}).get("list", []):
        q = v.get("query")
        q = q.get("query") if isinstance(q, dict) else q
        if v.get("type") == "query" and q:
            out.append((f"variable {v.get('name')!r}", q))
    return out


def main(scrape_path, dashboard_path, alerts_path):
    known = exported(open(scrape_path).read()) | PROMETHEUS_OWN
    problems = []
    if not known - PROMETHEUS_OWN:
        problems.append(f"{scrape_path}: no metric declared (# TYPE): not a scrape of the gate")
    dash = json.load(open(dashboard_path))
    rules = yaml.safe_load(open(alerts_path))
    exprs = [(f"{dashboard_path}: {where}", e) for where, e in dashboard_exprs(dash)]
    exprs += [(f"{alerts_path}: alert {r.get('alert') or r.get('record')}", r["expr"])
              for g in rules["groups"] for r in g["rules"]]
    if not any(e for w, e in exprs if w.startswith(dashboard_path)):
        problems.append(f"{dashboard_path}: no panel asks for anything")
    used = set()
    for where, expr in exprs:
        if expr is None:
            problems.append(f"{where}: has no query")
            continue
        names, unknown = metric_names(expr)
        used |= names
        if not names:
            problems.append(f"{where}: selects no metric: {expr}")
        for n in sorted(names - known):
            problems.append(f"{where}: {n} is not a metric the gate exports: {expr}")
        for u in sorted(unknown):
            problems.append(f"{where}: {u}() is not a PromQL function: {expr}")
    # The dashboard's queries as Prometheus would get them: promtool parses them.
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "dashboard-rules.yml")
        records = [{"record": f"dashboard:q{i}", "expr": grafana_filled(e)}
                   for i, (w, e) in enumerate(exprs) if e and w.startswith(dashboard_path + ": panel")]
        yaml.safe_dump({"groups": [{"name": "dashboard", "rules": records}]}, open(path, "w"))
        check = subprocess.run(["promtool", "check", "rules", path], capture_output=True, text=True)
        if check.returncode != 0:
            problems.append(f"{dashboard_path}: promtool does not parse its queries:\n{check.stdout}{check.stderr}")
    for p in problems:
        print(p, file=sys.stderr)
    parts = {n + s for n in known for s in ("_bucket", "_sum", "_count")} & known
    not_shown = sorted(known - PROMETHEUS_OWN - used - parts - {n[: -len("_bucket")] for n in used if n.endswith("_bucket")})
    print(f"{len(exprs)} expressions, metrics used: {', '.join(sorted(used))}")
    if not_shown:
        print(f"exported but on no panel or alert: {', '.join(not_shown)}")
    return 1 if problems else 0


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    sys.exit(main(*sys.argv[1:]))
