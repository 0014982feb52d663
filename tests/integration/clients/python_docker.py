"""Everyday python3-docker (Debian's, 5.0) operations against DOCKER_HOST.

Prints one JSON object of what each step saw, so that a run straight at the daemon and a
run through the gate can be compared. Usage: python_docker.py IMAGE NAME_PREFIX [API_VERSION]
(API_VERSION pins the client, e.g. 1.24; default: negotiated with the daemon).
"""
import json
import sys
import time

import docker

image, prefix = sys.argv[1], sys.argv[2]
client = docker.from_env(timeout=60, version=sys.argv[3] if len(sys.argv) > 3 else "auto")
seen = {}


def step(name, fn):
    try:
        seen[name] = fn()
    except Exception as e:  # the difference is what the test reports
        seen[name] = "error: %s: %s" % (type(e).__name__, str(e)[:300])


step("ping", lambda: client.ping())
step("run_output", lambda: client.containers.run(image, ["echo", "hi"], name=prefix + "-once", remove=True).decode())
since = int(time.time()) - 1
box = client.containers.run(image, ["sleep", "60"], name=prefix + "-box", detach=True)
step("exec_run_demux", lambda: [x.decode() if x else None for x in box.exec_run(["sh", "-c", "echo out; echo err >&2"], demux=True).output])
step("exec_run_stream", lambda: b"".join(box.exec_run(["echo", "streamed"], stream=True).output).decode())
step("exec_run_exit", lambda: box.exec_run(["sh", "-c", "exit 3"]).exit_code)
step("list_has_box", lambda: prefix + "-box" in [c.name for c in client.containers.list(all=True)])
step("list_filtered", lambda: [c.name for c in client.containers.list(filters={"name": prefix + "-box"})])
step("images_list", lambda: any(image in (t or "") for i in client.images.list() for t in i.tags))
step("image_get", lambda: image in client.images.get(image).tags)
talker = client.containers.run(image, ["sh", "-c", "sleep 2; echo attached; echo logged"], name=prefix + "-talker", detach=True)
step("attach", lambda: talker.attach(stdout=True, stderr=True, stream=False, logs=False).decode())
step("wait", lambda: talker.wait(timeout=30)["StatusCode"])
step("logs", lambda: talker.logs().decode())
step("logs_stream", lambda: b"".join(talker.logs(stream=True)).decode())
step("logs_since", lambda: talker.logs(since=since, timestamps=False).decode())
step("stop", lambda: box.stop(timeout=0) is None)
step("state_after_stop", lambda: client.containers.get(box.id).status)
step("remove", lambda: (box.remove(force=True), talker.remove(v=False, link=False, force=False))[0] is None)
step("gone", lambda: [c.name for c in client.containers.list(all=True, filters={"name": prefix})])
until = int(time.time()) + 1
step("events", lambda: sorted({e.get("status") for e in client.events(since=since, until=until, decode=True,
                                                                      filters={"container": prefix + "-talker"})}))
print(json.dumps(seen, sort_keys=True))
