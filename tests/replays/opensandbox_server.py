#!/usr/bin/env python3
"""A replay of opensandbox-server's docker runtime, written for dockgate's tests.

What opensandbox-server (its services/docker/ runtime, over docker-py 7.x) asks of the
Engine API when it starts, creates a sandbox in bridge mode with a host volume, renews,
pauses, resumes and deletes it: the same requests, in the same order, with the same
bodies and queries, as docs/policy.md ("opensandbox.json") lists them from the server's
source. Nothing of the server is copied; no request is added that the server does not make.

  opensandbox_server.py SOCKET --image IMAGE --execd-image IMAGE --host-path PATH
                        [--mount-path /workspace] [--cmd JSON] [--egress-image IMAGE]

With --egress-image, the sandbox has a networkPolicy: the server's egress sidecar is
created and started first, and the sandbox shares its network namespace.

It talks HTTP/1.1 over the Unix socket SOCKET (the gate's), stops at the first answer the
server would not accept, and prints one JSON line: {"sandbox": id, "execd_port": n, ...}.
The caller judges the daemon's own record.
"""
import argparse
import http.client
import io
import json
import random
import socket
import sys
import tarfile
import time
import urllib.parse
import uuid


class UnixConnection(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("localhost", timeout=60)
        self.unix_path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(60)
        self.sock.connect(self.unix_path)


class Engine:
    def __init__(self, path):
        self.path = path
        self.version = None

    def call(self, method, path, body=None, query=None, expect=(200,), headers=None,
             raw=False):
        target = path if self.version is None or path == "/version" else f"/v{self.version}{path}"
        if query:
            target += "?" + urllib.parse.urlencode(query)
        h = {"User-Agent": "docker-sdk-python/7.1.0"}
        data = None
        if body is not None and not raw:
            data = json.dumps(body).encode()
            h["Content-Type"] = "application/json"
        elif raw:
            data = body
        h.update(headers or {})
        conn = UnixConnection(self.path)
        conn.request(method, target, body=data, headers=h)
        res = conn.getresponse()
        payload = res.read()
        conn.close()
        if res.status not in expect:
            raise SystemExit(f"replay: {method} {target} answered {res.status}: "
                             f"{payload[:400].decode(errors='replace')}")
        return res.status, payload

    def json(self, method, path, **kw):
        status, payload = self.call(method, path, **kw)
        return status, (json.loads(payload) if payload.strip() else None)


def tar_of(entries):
    """A tar as the server builds it: (name, bytes or None for a directory, mode)."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as t:
        for name, data, mode in entries:
            info = tarfile.TarInfo(name)
            info.mode = mode
            info.mtime = int(time.time())
            if data is None:
                info.type = tarfile.DIRTYPE
                t.addfile(info)
            else:
                info.size = len(data)
                t.addfile(info, io.BytesIO(data))
    return out.getvalue()


def file_from_archive(payload, name):
    with tarfile.open(fileobj=io.BytesIO(payload)) as t:
        member = t.getmember(name)
        return t.extractfile(member).read()


def inspect(engine, cid):
    return engine.json("GET", f"/containers/{cid}/json")[1]


def startup(engine):
    # docker.from_env(): GET /version; the server's restore pass: every container, inspected.
    _, v = engine.json("GET", "/version")
    engine.version = v["ApiVersion"]
    _, listed = engine.json("GET", "/containers/json", query={"all": "1"})
    for c in listed:
        inspect(engine, c["Id"])
    return listed


def ensure_image(engine, image):
    status, _ = engine.call("GET", f"/images/{image}/json", expect=(200, 404))
    if status == 404:
        repo, _, tag = image.rpartition(":")
        engine.call("POST", "/images/create", query={"fromImage": repo, "tag": tag or "latest"})
        engine.call("GET", f"/images/{image}/json")


def fetch_execd(engine, execd_image, platform):
    # runtime.py: a helper container of the execd image, started, read by archive, removed.
    ensure_image(engine, execd_image)
    name = f"sandbox-execd-{uuid.uuid4()}"
    _, created = engine.json("POST", "/containers/create", expect=(201,),
                             query={"name": name, "platform": platform},
                             body={"Image": execd_image, "Cmd": ["tail", "-f", "/dev/null"],
                                   "HostConfig": {"AutoRemove": False, "NetworkMode": "default"}})
    helper = created["Id"]
    inspect(engine, helper)
    engine.call("POST", f"/containers/{helper}/start", expect=(204,))
    inspect(engine, helper)
    _, execd = engine.call("GET", f"/containers/{helper}/archive", query={"path": "/execd"})
    _, boot = engine.call("GET", f"/containers/{helper}/archive", query={"path": "/bootstrap.sh"})
    engine.call("DELETE", f"/containers/{helper}", expect=(204,),
                query={"v": "False", "link": "False", "force": "True"})
    return file_from_archive(execd, "execd"), file_from_archive(boot, "bootstrap.sh"), helper


def start_egress(engine, args, sandbox_id):
    """networking.py: the egress sidecar, its ports published, polled until healthy."""
    ensure_image(engine, args.egress_image)
    ports = random.sample(range(40000, 60000), 3)
    token = uuid.uuid4().hex
    rules = json.dumps({"defaultAction": "deny", "egress": [{"action": "allow",
                                                              "target": "pypi.org"}]})
    body = {
        "Image": args.egress_image,
        "Env": [f"OPENSANDBOX_EGRESS_RULES={rules}", "OPENSANDBOX_EGRESS_MODE=dns",
                f"OPENSANDBOX_EGRESS_TOKEN={token}"],
        "Labels": {"opensandbox.io/egress-sidecar-for": sandbox_id},
        "ExposedPorts": {"44772/tcp": {}, "8080/tcp": {}, "18080/tcp": {}},
        "HostConfig": {
            "NetworkMode": "bridge", "CapAdd": ["NET_ADMIN"],
            "PortBindings": {f"{p}/tcp": [{"HostIp": "0.0.0.0", "HostPort": str(h)}]
                             for p, h in zip((44772, 8080, 18080), ports)},
        },
    }
    _, created = engine.json("POST", "/containers/create", expect=(201,),
                             query={"name": f"sandbox-egress-{sandbox_id}"}, body=body)
    sidecar = created["Id"]
    inspect(engine, sidecar)
    engine.call("POST", f"/containers/{sidecar}/start", expect=(204,))
    ping(ports[2], "/healthz")
    return sidecar, token, ports


def create_sandbox(engine, args):
    sandbox_id = str(uuid.uuid4())
    _, info = engine.json("GET", "/info")
    platform = f"{info.get('OSType', 'linux')}/{info.get('Architecture', 'x86_64')}"
    ensure_image(engine, args.image)
    execd_port, http_port = random.sample(range(40000, 60000), 2)
    sidecar = None
    if args.egress_image:
        sidecar, token, (execd_port, http_port, _) = start_egress(engine, args, sandbox_id)
    expires = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(time.time() + 600))
    body = {
        "Image": args.image,
        "Entrypoint": ["/opt/opensandbox/bootstrap.sh"],
        "Cmd": json.loads(args.cmd),
        "Env": ["OPENSANDBOX_REPLAY=1"],
        "Labels": {"opensandbox.io/id": sandbox_id, "opensandbox.io/expires-at": expires,
                   "opensandbox.io/embedding-proxy-port": str(execd_port),
                   "opensandbox.io/http-port": str(http_port)},
        "ExposedPorts": {"44772/tcp": {}, "8080/tcp": {}},
        "AttachStdout": True, "AttachStderr": True,
        "HostConfig": {
            "NetworkMode": "bridge",
            "PortBindings": {"44772/tcp": [{"HostIp": "0.0.0.0", "HostPort": str(execd_port)}],
                             "8080/tcp": [{"HostIp": "0.0.0.0", "HostPort": str(http_port)}]},
            "Binds": [f"{args.host_path}:{args.mount_path}:rw"],
            "SecurityOpt": ["no-new-privileges:true"],
            "CapDrop": ["AUDIT_WRITE", "MKNOD", "NET_ADMIN", "NET_RAW", "SYS_ADMIN", "SYS_MODULE",
                        "SYS_PTRACE", "SYS_TIME", "SYS_TTY_CONFIG"],
            "PidsLimit": 4096, "Memory": 512 * 1024 * 1024, "NanoCpus": 1000000000,
        },
    }
    if sidecar:
        # The sandbox in the sidecar's network namespace: no ports of its own, NET_ADMIN
        # dropped, the token the sidecar checks.
        del body["ExposedPorts"]
        body["HostConfig"]["NetworkMode"] = f"container:{sidecar}"
        del body["HostConfig"]["PortBindings"]
        body["HostConfig"]["CapDrop"].append("NET_ADMIN")
        body["Labels"]["opensandbox.io/egress-auth-token"] = token
    _, created = engine.json("POST", "/containers/create", expect=(201,),
                             query={"name": f"sandbox-{sandbox_id}"}, body=body)
    cid = created["Id"]
    image_id = inspect(engine, cid)["Image"]
    engine.call("GET", f"/images/{image_id}/json")
    execd, boot, helper = fetch_execd(engine, args.execd_image, platform)
    # Four archive writes into the stopped sandbox: the directory at /, then the file into it.
    for name, data in (("execd", execd), ("bootstrap.sh", boot)):
        engine.call("PUT", f"/containers/{cid}/archive", query={"path": "/"}, raw=True,
                    body=tar_of([("opt/opensandbox", None, 0o755)]))
        engine.call("PUT", f"/containers/{cid}/archive", query={"path": "/opt/opensandbox"},
                    raw=True, body=tar_of([(name, data, 0o755)]))
    engine.call("POST", f"/containers/{cid}/start", expect=(204,))
    return sandbox_id, cid, execd_port, helper, sidecar


def find_sandbox(engine, sandbox_id):
    filters = json.dumps({"label": [f"opensandbox.io/id={sandbox_id}"]})
    _, listed = engine.json("GET", "/containers/json", query={"all": "1", "filters": filters})
    if len(listed) != 1:
        raise SystemExit(f"replay: {len(listed)} containers labelled {sandbox_id}")
    return inspect(engine, listed[0]["Id"])


def ping(port, path="/ping", deadline=20.0):
    # The SDK's ping loop (execd answers on the published port once bootstrap.sh started
    # it), and the server's health poll of the egress sidecar.
    end = time.time() + deadline
    while time.time() < end:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", path)
            res = conn.getresponse()
            text = res.read().decode()
            if res.status == 200:
                return text.strip()
        except OSError:
            pass
        time.sleep(0.1)
    raise SystemExit(f"replay: nothing answered {path} on 127.0.0.1:{port}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("socket")
    ap.add_argument("--image", required=True)
    ap.add_argument("--execd-image", required=True)
    ap.add_argument("--host-path", required=True)
    ap.add_argument("--mount-path", default="/workspace")
    ap.add_argument("--cmd", default='["sh", "-c", "sleep 600"]')
    ap.add_argument("--egress-image", help="a networkPolicy: the egress sidecar's image")
    ap.add_argument("--keep", action="store_true", help="stop before the delete")
    args = ap.parse_args()
    engine = Engine(args.socket)
    startup(engine)
    sandbox_id, cid, execd_port, helper, sidecar = create_sandbox(engine, args)
    answer = ping(execd_port)
    c = find_sandbox(engine, sandbox_id)
    # Renew: the labels with a new expiry, as a raw POST /update (the daemon ignores Labels).
    labels = dict(c["Config"]["Labels"])
    labels["opensandbox.io/expires-at"] = time.strftime(
        "%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(time.time() + 1200))
    engine.call("POST", f"/containers/{cid}/update", body={"Labels": labels})
    inspect(engine, cid)
    # Pause and resume.
    find_sandbox(engine, sandbox_id)
    engine.call("POST", f"/containers/{cid}/pause", expect=(204,))
    paused = inspect(engine, cid)["State"]["Paused"]
    engine.call("POST", f"/containers/{cid}/unpause", expect=(204,))
    result = {"sandbox": sandbox_id, "container": cid, "helper": helper,
              "execd_port": execd_port, "execd_answer": answer, "paused": paused,
              "sidecar": sidecar}
    if not args.keep:
        find_sandbox(engine, sandbox_id)
        engine.call("POST", f"/containers/{cid}/kill", expect=(204, 409))
        engine.call("DELETE", f"/containers/{cid}", expect=(204,),
                    query={"v": "False", "link": "False", "force": "True"})
        if sidecar:
            filters = json.dumps({"label": [f"opensandbox.io/egress-sidecar-for={sandbox_id}"]})
            _, found = engine.json("GET", "/containers/json",
                                   query={"all": "1", "filters": filters})
            for c in found:
                inspect(engine, c["Id"])
                engine.call("DELETE", f"/containers/{c['Id']}", expect=(204,),
                            query={"v": "False", "link": "False", "force": "True"})
        result["deleted"] = True
    print(json.dumps(result))


if __name__ == "__main__":
    main()
