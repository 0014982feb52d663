#!/usr/bin/env python3
"""compose/fleet/haproxy.cfg's routing, against three stub sidecars that answer with their
name (no engine, no timing judged):

- a call naming a session in its JSON body goes to one server, every time;
- DELETE /sessions/{id} and POST /sessions/{id}/restart go where that ID's body calls go;
- an upload larger than the buffer with session_id first still follows the ID;
- POST /sessions is spread over all servers (leastconn; equal load takes turns);
- a stopped server's sessions go elsewhere, and the others' stay where they were
  (consistent hashing).

  tests/fleet/haproxy_routing_test.py   (needs haproxy 2.6 on PATH)
"""
import http.client
import http.server
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time

CFG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "compose", "fleet", "haproxy.cfg")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def stub(name):
    """A sidecar stand-in answering every call with its name; returns (server, port)."""
    class Handler(http.server.BaseHTTPRequestHandler):
        def handle_any(self):
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            body = name.encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = do_DELETE = handle_any

        def log_message(self, *args):
            pass

        def handle(self):
            try:
                super().handle()
            except ConnectionResetError:  # HAProxy's health checks close at once
                pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, server.server_address[1]


def call(port, method, path, body):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    c.request(method, path, body=body, headers={"Content-Type": "application/json"})
    r = c.getresponse()
    out = r.read().decode()
    c.close()
    return out if r.status == 200 else f"status {r.status}"


def admin(sock, command):
    s = socket.socket(socket.AF_UNIX)
    s.connect(sock)
    s.sendall(command.encode() + b"\n")
    out = b""
    while chunk := s.recv(65536):
        out += chunk
    return out.decode()


def main():
    stubs = {name: stub(name) for name in ("fleet-1", "fleet-2", "fleet-3")}
    port = free_port()
    tmp = tempfile.mkdtemp(prefix="dg-haproxy-routing.")
    sock = os.path.join(tmp, "admin.sock")
    env = dict(os.environ, FLEET_BIND=f"127.0.0.1:{port}", FLEET_ADMIN_SOCKET=sock,
               **{f"FLEET_HOST_{name[-1]}": f"127.0.0.1:{p}" for name, (_, p) in stubs.items()})
    proxy = subprocess.Popen(["haproxy", "-db", "-f", CFG], env=env, stdout=subprocess.DEVNULL,
                             stderr=open(os.path.join(tmp, "haproxy.log"), "w"))
    failures = []

    def check(what, ok):
        print(("ok   " if ok else "FAIL ") + what)
        if not ok:
            failures.append(what)

    try:
        for _ in range(100):
            try:
                if admin(sock, "show stat").count(",UP,") >= 6:
                    break
            except OSError:
                pass
            time.sleep(0.1)
        sids = [f"{n:032x}" for n in range(1000, 1030)]
        where = {}
        for sid in sids:
            got = {call(port, "POST", "/exec", json.dumps({"session_id": sid, "code": "print(1)"})) for _ in range(3)}
            got |= {call(port, "POST", "/files/list", json.dumps({"session_id": sid}))}
            where[sid] = got.pop() if len(got) == 1 else None
        check("a session's body calls go to one server, every time", all(where.values()))
        check("the sessions spread over all three servers", set(where.values()) == set(stubs))
        check("DELETE /sessions/{id} and POST /sessions/{id}/restart follow the ID",
              all(call(port, "DELETE", f"/sessions/{sid}", "{}") == where[sid] and
                  call(port, "POST", f"/sessions/{sid}/restart", "{}") == where[sid] for sid in sids))
        big = "A" * 200_000
        check("an upload larger than the buffer, session_id first, follows the ID",
              all(call(port, "POST", "/files", json.dumps({"session_id": sid, "path": "x", "data_base64": big})) == where[sid]
                  for sid in sids[:6]))
        made = [call(port, "POST", "/sessions", "{}") for _ in range(6)]
        check("POST /sessions reaches every server", set(made) == set(stubs))

        # fleet-2 leaves (maintenance through the runtime API, as a failed check would).
        admin(sock, "disable server new_sessions/fleet-2")
        for _ in range(50):
            if "fleet-2" not in {call(port, "POST", "/sessions", "{}") for _ in range(6)}:
                break
            time.sleep(0.1)
        after = {sid: call(port, "POST", "/exec", json.dumps({"session_id": sid})) for sid in sids}
        check("fleet-2's sessions go to the others", all(after[s] in ("fleet-1", "fleet-3") for s in sids if where[s] == "fleet-2"))
        check("the others' sessions stay where they were", all(after[s] == where[s] for s in sids if where[s] != "fleet-2"))
    finally:
        proxy.terminate()
        proxy.wait()
        for server, _ in stubs.values():
            server.shutdown()
        subprocess.run(["rm", "-rf", tmp])
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
