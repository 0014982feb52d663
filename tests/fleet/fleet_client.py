#!/usr/bin/env python3
"""The load of scripts/fleet.sh: sessions through the fleet's one address (HAProxy).

  fleet_client.py failover --url URL --key KEY --engine NAME=DOCKER_HOST... \
      --kill "COMMAND" --lease S [--sessions 30]
      Makes the sessions, writes files in each (uploads and a cell's outputs), reads one
      back, records which host holds each (its container's engine), runs the kill
      command (a dead host), then asks every session again until it answers with all its
      files or 3x the lease passes. Prints the figures and one JSON line (prefix "RESULT ").
      Exit 1 when a session did not answer again or a file was lost.

  fleet_client.py bench --url URL --key KEY [--sessions 50] [--seconds 20]
      Makes the sessions, then each runs print(1) cells back to back for the time given,
      all at once. Prints cells/s and one JSON line. Exit 1 when a cell failed.

Standard library only (threads and http.client): the machine has nothing else to offer,
and a client this small shows what it measures.
"""
import argparse
import base64
import hashlib
import http.client
import json
import statistics
import subprocess
import sys
import threading
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor


class Api:
    """One keep-alive connection to the fleet's address; reopened after any failure."""

    def __init__(self, url, key, timeout=120):
        parts = urllib.parse.urlsplit(url)
        self.host, self.port = parts.hostname, parts.port or 80
        self.key, self.timeout = key, timeout
        self.conn = None

    def call(self, method, path, body=None):
        """(status, parsed body or None). A connection error is status 0."""
        data = json.dumps(body if body is not None else {}).encode()
        headers = {"Authorization": f"Bearer {self.key}", "Content-Type": "application/json"}
        try:
            if self.conn is None:
                self.conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
            self.conn.request(method, path, body=data, headers=headers)
            resp = self.conn.getresponse()
            raw = resp.read()
            if resp.getheader("Connection", "").lower() == "close":
                self.close()
        except (OSError, http.client.HTTPException) as e:
            self.close()
            return 0, {"detail": f"{type(e).__name__}: {e}"}
        try:
            return resp.status, json.loads(raw or b"{}")
        except ValueError:
            return resp.status, {"detail": raw[:200].decode(errors="replace")}

    def close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def create_session(api, archive_key):
    status, body = api.call("POST", "/sessions", {"archive_key": archive_key})
    if status != 200 or "session_id" not in body:
        raise RuntimeError(f"POST /sessions: {status} {body}")
    return body["session_id"]


def session_files(i):
    """What session i writes: path under /workspace -> bytes. Deterministic per session."""
    seed = hashlib.sha256(f"fleet-{i}".encode()).digest()
    return {
        "uploads/notes.txt": f"session {i}: notes\n".encode(),
        "uploads/data.bin": seed * 64,  # 2 KiB of bytes that are not text
        "uploads/deep/nested/c.txt": f"nested file of session {i}\n".encode(),
        "outputs/result.txt": f"result of session {i}: {sum(range(i + 1))}\n".encode(),  # by a cell
        "outputs/table.csv": "".join(f"{i},{n},{n * n}\n" for n in range(50)).encode(),  # by a cell
    }


CELL_WRITES = (
    "import os\n"
    "os.makedirs('/workspace/outputs', exist_ok=True)\n"
    "open('/workspace/outputs/result.txt','w').write('result of session {i}: ' + str(sum(range({i} + 1))) + '\\n')\n"
    "open('/workspace/outputs/table.csv','w').write(''.join(f'{i},{{n}},{{n*n}}\\n' for n in range(50)))\n"
    "print('written')\n"
)

# Reads every file the session wrote and prints path and SHA-256, one a line.
CELL_READS = (
    "import hashlib, json, os\n"
    "paths = json.loads({paths!r})\n"
    "for p in paths:\n"
    "    try: print(p, hashlib.sha256(open('/workspace/' + p, 'rb').read()).hexdigest())\n"
    "    except OSError as e: print(p, 'missing', e.errno)\n"
)


def write_session(api, i, sid):
    """Uploads three files, a cell writes two, one is read back. Raises on any failure."""
    files = session_files(i)
    for path, data in files.items():
        if path.startswith("uploads/"):
            status, body = api.call("POST", "/files", {"session_id": sid, "path": path,
                                                       "data_base64": base64.b64encode(data).decode()})
            if status != 200:
                raise RuntimeError(f"POST /files {path}: {status} {body}")
    status, body = api.call("POST", "/exec", {"session_id": sid, "code": CELL_WRITES.format(i=i)})
    if status != 200 or body.get("exit_code") != 0:
        raise RuntimeError(f"POST /exec (writes): {status} {body}")
    status, body = api.call("POST", "/files/get", {"session_id": sid, "path": "uploads/notes.txt"})
    if status != 200 or base64.b64decode(body.get("data_base64", "")) != files["uploads/notes.txt"]:
        raise RuntimeError(f"POST /files/get: {status} {body}")


def check_session(api, i, sid):
    """Asks the session for everything it wrote: /exec hashing every file, /files/list,
    /files/get of one. Returns (answered, lost paths, detail)."""
    files = session_files(i)
    status, body = api.call("POST", "/exec", {"session_id": sid, "code": CELL_READS.format(paths=json.dumps(sorted(files)))})
    if status != 200 or body.get("exit_code") != 0:
        return False, None, f"/exec {status} {str(body)[:160]}"
    seen = dict(line.split(" ", 1) for line in body.get("stdout", "").splitlines() if " " in line)
    lost = [p for p, data in files.items() if seen.get(p) != hashlib.sha256(data).hexdigest()]
    status, listing = api.call("POST", "/files/list", {"session_id": sid})
    if status != 200:
        return False, None, f"/files/list {status} {str(listing)[:160]}"
    listed = {f["path"] for f in listing.get("files", [])}
    lost += [p for p in files if p not in listed and p not in lost]
    status, got = api.call("POST", "/files/get", {"session_id": sid, "path": "uploads/data.bin"})
    if status != 200:
        return False, None, f"/files/get {status} {str(got)[:160]}"
    if base64.b64decode(got.get("data_base64", "")) != files["uploads/data.bin"] and "uploads/data.bin" not in lost:
        lost.append("uploads/data.bin")
    return True, lost, "ok"


def holders(engines):
    """session ID -> host name, from each engine's running session containers."""
    where = {}
    for name, host in engines.items():
        out = subprocess.run(["docker", "-H", host, "ps", "--filter", "label=sandbox.session_id",
                              "--format", '{{.Label "sandbox.session_id"}}'],
                             capture_output=True, text=True, timeout=60)
        for sid in out.stdout.split():
            where[sid] = name
    return where


def parallel(fn, items, workers):
    with ThreadPoolExecutor(max_workers=workers) as ex:
        return list(ex.map(fn, items))


def failover(args):
    engines = dict(e.split("=", 1) for e in args.engine)
    local = threading.local()

    def api():
        if not hasattr(local, "api"):
            local.api = Api(args.url, args.key)
        return local.api

    def prepare(i):
        try:
            sid = create_session(api(), f"fleet-{i}")
        except RuntimeError as e:
            return None, str(e)
        try:
            write_session(api(), i, sid)
            return sid, None
        except RuntimeError as e:
            return sid, str(e)

    t0 = time.monotonic()
    prepared = parallel(prepare, range(args.sessions), 6)
    sids = [sid for sid, _ in prepared]
    failed = [(i, error) for i, (_, error) in enumerate(prepared) if error]
    if failed:
        # Nothing to fail over: the fleet does not serve sessions through its address yet.
        print(f"{len(failed)} of {args.sessions} sessions could not be made and written before the kill; first: "
              f"session {failed[0][0]}: {failed[0][1]}")
        print("RESULT " + json.dumps({"sessions": args.sessions, "not_prepared": len(failed)}))
        parallel(lambda s: Api(args.url, args.key).call("DELETE", f"/sessions/{s}"), [s for s in sids if s], 6)
        return 1
    before = holders(engines)
    placement = {h: sum(1 for s in sids if before.get(s) == h) for h in engines}
    print(f"{args.sessions} sessions made and written in {time.monotonic() - t0:.1f} s; held by "
          + ", ".join(f"{h}: {n}" for h, n in placement.items()), flush=True)
    victims = {s for s in sids if before.get(s) == args.victim}

    killed_at = time.monotonic()
    subprocess.run(args.kill, shell=True, check=True)
    print(f"{args.victim} killed ({len(victims)} sessions on it); asking every session again", flush=True)
    bound = 3 * args.lease

    def recheck(i):
        sid, a = sids[i], Api(args.url, args.key, timeout=1.5 * args.lease)
        last = ""
        while time.monotonic() - killed_at < bound:
            answered, lost, last = check_session(a, i, sid)
            if answered:
                return {"sid": sid, "answered": True, "after": time.monotonic() - killed_at, "lost": lost}
            time.sleep(0.5)
        return {"sid": sid, "answered": False, "after": None, "lost": None, "last": last}

    results = parallel(recheck, range(args.sessions), args.sessions)
    after = holders({h: e for h, e in engines.items() if h != args.victim})
    moved = [r for r in results if r["sid"] in victims and r["answered"] and after.get(r["sid"]) not in (None, args.victim)]
    times = sorted(r["after"] for r in moved)
    unanswered = [r for r in results if not r["answered"]]
    lost = sum(len(r["lost"]) for r in results if r["answered"])
    unverified = len(unanswered) * len(session_files(0))
    stayed_ok = sum(1 for r in results if r["sid"] not in victims and r["answered"])
    print(f"sessions on {args.victim}: {len(victims)}; moved and answering: {len(moved)}; "
          f"the others answering: {stayed_ok}/{args.sessions - len(victims)}")
    if times:
        print(f"time to take over (kill -> first good answer through HAProxy): median {statistics.median(times):.1f} s, "
              f"worst {times[-1]:.1f} s (lease {args.lease} s)")
    print(f"files lost: {lost} of {(args.sessions - len(unanswered)) * len(session_files(0))} checked"
          + (f"; {len(unanswered)} sessions did not answer within {bound} s ({unverified} files unverified)" if unanswered else ""))
    for r in unanswered[:5]:
        print(f"  {r['sid']}: {r['last']}")
    for r in results:
        if r["answered"] and r["lost"]:
            print(f"  {r['sid']} lost {r['lost']}")
    print("RESULT " + json.dumps({"sessions": args.sessions, "on_victim": len(victims), "moved": len(moved),
                                   "takeover_median_s": statistics.median(times) if times else None,
                                   "takeover_worst_s": times[-1] if times else None, "files_lost": lost,
                                   "unanswered": len(unanswered), "placement": placement}))
    # Ends the sessions (through the address: their new holders archive nothing in FUSE mode).
    parallel(lambda s: Api(args.url, args.key).call("DELETE", f"/sessions/{s}"), sids, 6)
    return 0 if not unanswered and lost == 0 and len(moved) == len(victims) else 1


def bench(args):
    local = threading.local()

    def api():
        if not hasattr(local, "api"):
            local.api = Api(args.url, args.key)
        return local.api

    sids = parallel(lambda i: create_session(api(), f"bench-{args.tag}-{i}"), range(args.sessions), 8)
    apis = [Api(args.url, args.key) for _ in sids]
    failures = []
    # One warm-up cell each (the session's runner up), then all at once for the time given.
    for ok in parallel(lambda k: apis[k].call("POST", "/exec", {"session_id": sids[k], "code": "print(1)"})[0] == 200,
                       range(len(sids)), len(sids)):
        if not ok:
            failures.append("warm-up")
    start = threading.Barrier(len(sids) + 1)
    counts = [0] * len(sids)
    latencies = [[] for _ in sids]

    def loop(k):
        start.wait()
        end = time.monotonic() + args.seconds
        while time.monotonic() < end:
            t = time.monotonic()
            status, body = apis[k].call("POST", "/exec", {"session_id": sids[k], "code": "print(1)"})
            if status != 200 or body.get("stdout") != "1\n":
                failures.append(f"{status} {str(body)[:120]}")
                time.sleep(0.2)  # a failing session must not spin and starve the others
                continue
            latencies[k].append(time.monotonic() - t)
            counts[k] += 1

    threads = [threading.Thread(target=loop, args=(k,)) for k in range(len(sids))]
    for t in threads:
        t.start()
    start.wait()
    t0 = time.monotonic()
    for t in threads:
        t.join()
    wall = time.monotonic() - t0
    all_lat = sorted(x for xs in latencies for x in xs)
    cells = sum(counts)
    parallel(lambda s: Api(args.url, args.key).call("DELETE", f"/sessions/{s}"), sids, 8)
    rate = cells / wall
    p50 = statistics.median(all_lat) * 1000 if all_lat else float("nan")
    print(f"{args.tag}: {len(sids)} sessions, {cells} cells in {wall:.1f} s: {rate:.1f} cells/s, p50 {p50:.0f} ms,"
          f" failures {len(failures)}" + (f" (first: {failures[0]})" if failures else ""), flush=True)
    print("RESULT " + json.dumps({"tag": args.tag, "sessions": len(sids), "cells": cells, "seconds": wall,
                                   "cells_per_s": rate, "p50_ms": p50, "failures": len(failures)}))
    return 1 if failures else 0


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("failover")
    f.add_argument("--url", required=True)
    f.add_argument("--key", required=True)
    f.add_argument("--engine", action="append", required=True, help="NAME=DOCKER_HOST, one per host")
    f.add_argument("--victim", required=True, help="the host NAME the kill command kills")
    f.add_argument("--kill", required=True, help="shell command that kills the victim host")
    f.add_argument("--lease", type=float, required=True)
    f.add_argument("--sessions", type=int, default=30)
    b = sub.add_parser("bench")
    b.add_argument("--url", required=True)
    b.add_argument("--key", required=True)
    b.add_argument("--sessions", type=int, default=50)
    b.add_argument("--seconds", type=float, default=20)
    b.add_argument("--tag", default="bench")
    args = p.parse_args()
    return failover(args) if args.cmd == "failover" else bench(args)


if __name__ == "__main__":
    sys.exit(main())
