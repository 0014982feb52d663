"""A replay of gitlab-runner's docker executor (FF_NETWORK_PER_BUILD on), against DOCKER_HOST.

The Engine API calls one runner makes for two jobs of one project with a service, in its
order and with its bodies (the Go client's JSON: fields it leaves empty are omitted): the
daemon's info, image inspect and pull, the per-build network, the cache volume (created
with its labels, named runner-<token>-project-<id>-concurrent-<n>-cache-<md5 of the path>),
the service with its network alias and the wait-for-service container, the predefined and
build containers attached with stdin (the job's script goes in on stdin), start, wait,
inspect, and the cleanup. Then two jobs a runner configured loosely would send: a
privileged one and one with the engine socket bound. Written for dockgate's tests from
the runner's documented behaviour; prints what it saw.

Usage: gitlab_docker_executor.py IMAGE PREFIX   (PREFIX stands for runner-<token>)
"""
import hashlib
import struct
import sys

import docker

image, prefix = sys.argv[1], sys.argv[2]
api = docker.from_env(version="auto", timeout=60).api
project = prefix + "-project-1-concurrent-0"


def post(path, body, params=None, expect_json=True):
    r = api._post_json(api._url(path), data=body, params=params)
    api._raise_for_status(r)
    return r.json() if expect_json else r


def labels(job, kind):
    return {"com.gitlab.gitlab-runner.managed": "true", "com.gitlab.gitlab-runner.job.id": str(job),
            "com.gitlab.gitlab-runner.project.id": "1", "com.gitlab.gitlab-runner.type": kind}


def ensure_image(ref, helper=False):
    """Inspect, then (the helper) import the prebuilt tarball, then pull from the registry."""
    try:
        api.inspect_image(ref)
        return
    except docker.errors.NotFound:
        pass
    if helper:
        repo, tag = ref.rsplit(":", 1)
        r = api._post(api._url("/images/create"), params={"fromSrc": "-", "repo": repo, "tag": tag,
                      "changes": 'ENTRYPOINT ["/usr/bin/dumb-init", "/entrypoint"]'},
                      data=b"not a tarball", headers={"Content-Type": "application/x-tar"})
        print("helper import: %d %s" % (r.status_code, r.json().get("message", "")))
    api.pull(ref)
    api.inspect_image(ref)


def cache_volume(job, path):
    """VolumeCreate (the same name again for every job: the daemon answers with the existing
    one), then the permission setter's container: the helper image with the volume bound at
    /gitlab-runner-cache-init, started, waited for, removed."""
    name = project + "-cache-" + hashlib.md5(path.encode()).hexdigest()
    post("/volumes/create", {"Name": name, "Labels": labels(job, "cache")})
    body = {"Image": image, "Cmd": ["chmod", "777", "/gitlab-runner-cache-init"], "Labels": labels(job, "cache-init"),
            "HostConfig": {"LogConfig": {"Type": "json-file"}, "Binds": [name + ":/gitlab-runner-cache-init"]}}
    cid = post("/containers/create", body, params={"name": name + "-set-permission-0123abcd"})["Id"]
    api.start(cid)
    assert api.wait(cid)["StatusCode"] == 0
    api.remove_container(cid, force=True)
    return name


def create(name, job, kind, cmd, network, binds, aliases=None, stdin=False, privileged=False):
    host = {"Binds": binds, "LogConfig": {"Type": "json-file"}, "NetworkMode": network,
            "RestartPolicy": {"Name": "no"}}
    if privileged:
        host["Privileged"] = True
    body = {"Image": image, "Cmd": cmd, "Labels": labels(job, kind), "Env": ["CI=true", "CI_JOB_ID=%d" % job],
            "HostConfig": host,
            "NetworkingConfig": {"EndpointsConfig": {network: {"Aliases": aliases or []}}}}
    if stdin:
        body.update({"AttachStdin": True, "AttachStdout": True, "AttachStderr": True, "OpenStdin": True,
                     "StdinOnce": True})
    return post("/containers/create", body, params={"name": name})["Id"]


def run_script(cid, script):
    """Attach with stdin (hijacked), start, send the script, read the output, wait, inspect."""
    sock = api.attach_socket(cid, params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1})
    raw = sock._sock if hasattr(sock, "_sock") else sock
    api.start(cid)
    raw.sendall(script.encode())
    raw.shutdown(1)  # the script's end: the shell reads EOF
    out, buf = b"", b""
    while True:
        chunk = raw.recv(65536)
        if not chunk:
            break
        buf += chunk
        while len(buf) >= 8:
            size = struct.unpack(">I", buf[4:8])[0]
            if len(buf) < 8 + size:
                break
            out, buf = out + buf[8:8 + size], buf[8 + size:]
    raw.close()
    status = api.wait(cid)["StatusCode"]
    assert api.inspect_container(cid)["State"]["ExitCode"] == status
    return status, out.decode()


def job(number, keep_build=False):
    api.info()
    ensure_image(image, helper=True)  # the helper image, then the job's and the service's
    ensure_image(image)
    network = "%s-job-%d-network" % (project, number)
    post("/networks/create", {"Name": network, "CheckDuplicate": True, "Driver": "bridge",
                              "Labels": labels(number, "network")})
    binds = [cache_volume(number, "/cache") + ":/cache", cache_volume(number, "/builds") + ":/builds"]
    service = create("%s-%d-redis-0" % (project, number), number, "service", ["sleep", "300"], network, [],
                     aliases=["redis"])
    api.start(service)
    wait_for = create("%s-%d-redis-0-wait-for-service" % (project, number), number, "wait", ["nslookup", "redis"],
                      network, [])
    api.start(wait_for)
    assert api.wait(wait_for)["StatusCode"] == 0
    api.remove_container(wait_for, v=True, force=True)
    made = []
    for kind in ("predefined", "build"):
        name = "%s-%d-%s" % (project, number, kind)
        if kind == "build" and keep_build:
            name = prefix + "-build-kept"
        cid = create(name, number, kind, ["sh"], network, binds, stdin=True)
        made.append((cid, keep_build and kind == "build"))
        script = ("set -e\nmkdir -p /builds/app && cd /builds/app\n" if kind == "predefined" else
                  "cached=0; [ -f /cache/stamp ] && cached=1; date > /cache/stamp\n"
                  "nslookup redis >/dev/null && s=ok || s=down\necho job output: cached=$cached service=$s\n")
        status, out = run_script(cid, script)
        assert status == 0, (kind, status, out)
        if out:
            print("job %d %s: %s" % (number, kind, out.strip()))
    # Cleanup: kill, remove with anonymous volumes, disconnect, remove the network.
    for cid, keep in made + [(service, False)]:
        try:
            api.kill(cid)
        except docker.errors.APIError:
            pass  # not running
        if not keep:
            api.remove_container(cid, v=True, force=True)
    for cid, keep in made:
        if keep:
            api.disconnect_container_from_network(cid, network, force=True)
    api.remove_network(network)


def refused(what, **kw):
    network = "%s-job-9-network" % project
    post("/networks/create", {"Name": network, "CheckDuplicate": True, "Driver": "bridge", "Labels": labels(9, "network")})
    try:
        create("%s-9-build" % project, 9, "build", ["sh"], network, stdin=True, **kw)
        print("%s: created" % what)
    except docker.errors.APIError as e:
        print("%s: %s" % (what, e.explanation))
    api.remove_network(network)


print("cache volume:", project + "-cache-" + hashlib.md5(b"/cache").hexdigest())
job(1)
job(2, keep_build=True)
refused("privileged", binds=[], privileged=True)
refused("socket", binds=["/var/run/docker.sock:/var/run/docker.sock"])
