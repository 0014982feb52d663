#!/usr/bin/env python3
"""The sidecar's rooms, checked (docs/design.md, "The sidecar's rooms"; run by scripts/test.sh).

- No folder of sidecar/src holds more than MAX_FILES source files.
- The include graph points down: a file includes only files of its own room or of a room on
  a lower floor (FLOORS below); `dockgate/...` headers (the public ones and the other
  libraries) are the ground.
- Nothing below the fronts names the HTTP server's types.
- No function of sidecar/src is longer than MAX_LINES lines (universal-ctags reads them).

Prints every breach and exits 1 if there is any.
"""
import json
import os
import re
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "sidecar", "src")
MAX_FILES = 15
MAX_LINES = 80
# Higher floors may include lower ones. Rooms of one floor do not include each other.
FLOORS = {
    "front": 8,     # the API fronts and the HTTP server
    "core": 7,      # the session core: the rooms below, wired together
    "cells": 6,     # executors of a cell: plain exec, the runner / fork server, the kernel
    "files": 6,     # the workspace's files
    "commands": 6,  # a client's shell commands in its sandbox (OpenSandbox's execd)
    "sessions": 5,  # lifecycle, registry, containers, warm pool, instance lease
    "fleet": 4,     # the store's records, the store lease, forwarding
    "egress": 4,    # per-session networks
    "config": 4,    # the loader (its values, dockgate/sidecar/config.hpp, are the ground)
    "storage": 3,   # archives, local/S3/OSS stores, endpoints
    "engine": 2,    # the seam to the engine
    "util": 1,      # small helpers, ids, refusals
}
HTTP_TYPES = re.compile(r"(?<!client::)\b(http_request|http_reply|reply_stream|http_server)\b")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def sources():
    for dirpath, _, names in os.walk(ROOT):
        for n in sorted(names):
            if n.endswith((".cpp", ".hpp")):
                yield os.path.relpath(os.path.join(dirpath, n), ROOT)


def room(rel):
    return rel.split(os.sep)[0]


def main():
    breaches = []
    files = list(sources())
    per_folder = {}
    for f in files:
        per_folder.setdefault(os.path.dirname(f), []).append(f)
    for folder, fs in sorted(per_folder.items()):
        if len(fs) > MAX_FILES:
            breaches.append(f"sidecar/src/{folder}: {len(fs)} source files (at most {MAX_FILES})")
    for f in files:
        r = room(f)
        if r not in FLOORS:
            breaches.append(f"sidecar/src/{f}: room '{r}' has no floor in scripts/check-rooms.py")
            continue
        text = open(os.path.join(ROOT, f), encoding="utf-8").read()
        for inc in INCLUDE.findall(text):
            if inc.startswith("dockgate/"):
                continue
            target = room(inc)
            if target == r:
                continue
            if target not in FLOORS:
                breaches.append(f"sidecar/src/{f}: includes \"{inc}\", not a room's file")
            elif FLOORS[target] >= FLOORS[r]:
                breaches.append(f"sidecar/src/{f}: includes \"{inc}\": {r} (floor {FLOORS[r]}) onto "
                                f"{target} (floor {FLOORS[target]})")
        if r != "front":
            code = re.sub(r"//[^\n]*", "", text)
            for m in HTTP_TYPES.finditer(code):
                line = code.count("\n", 0, m.start()) + 1
                breaches.append(f"sidecar/src/{f}:{line}: names {m.group(1)} below the fronts")
                break
    tags = subprocess.run(
        ["ctags", "--fields=+ne", "--kinds-C++=f", "--output-format=json", "-o", "-", "-R", "."],
        cwd=ROOT, capture_output=True, text=True, check=True).stdout
    for line in tags.splitlines():
        t = json.loads(line)
        if t.get("kind") != "function" or "end" not in t or t["name"].startswith("__anon"):
            continue
        n = t["end"] - t["line"] + 1
        if n > MAX_LINES:
            name = t["name"] if "scope" not in t else t["scope"].split("::")[-1] + "::" + t["name"]
            breaches.append(f"sidecar/src/{t['path']}:{t['line']}: {name} is {n} lines (at most {MAX_LINES})")
    for b in breaches:
        print(b)
    print(f"check-rooms: {len(files)} files, {len(breaches)} breaches", file=sys.stderr)
    return 1 if breaches else 0


if __name__ == "__main__":
    sys.exit(main())
