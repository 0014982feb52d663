// OpenSandbox's own JS SDK (@alibaba-group/opensandbox, npm, scripts/node-clients.sh)
// against dockgate-sidecar's OpenSandbox front, through its public API only. One step per
// run, so the test can judge the daemon's record between steps:
//   node opensandbox_sdk.js create IMAGE          -> {"id":…, …} (the sandbox stays): the
//                                                    probe, commands (streamed, failing,
//                                                    background, in a bash session), files,
//                                                    an app's port, renew, list
//   node opensandbox_sdk.js pause|resume|kill ID  -> {"state":…}
//   node opensandbox_sdk.js escapes ID            -> what each escape got
//   node opensandbox_sdk.js volume IMAGE PATH     -> a host volume's sandbox, or its refusal
//   node opensandbox_sdk.js entrypoint IMAGE      -> a sandbox running `sleep 12345` (stays)
//   node opensandbox_sdk.js probe IMAGE           -> a sandbox with /workspace/probe.txt (stays)
//   node opensandbox_sdk.js info|read ID          -> its state and the Paused ones listed; the
//                                                    probe read by a command (no resume first)
// OPEN_SANDBOX_DOMAIN and OPEN_SANDBOX_API_KEY come from the environment, as a user sets them.
"use strict";
const { Sandbox, SandboxManager, ConnectionConfig } = require("@alibaba-group/opensandbox");

const connectionConfig = () =>
  new ConnectionConfig({ useServerProxy: true, disableMetrics: true, requestTimeoutSeconds: 60 });
const text = (execution) => execution.logs.stdout.map((m) => m.text).join("");
// An SDK error as the test compares it: the status and code the server answered.
const failure = (e) => ({ status: e.statusCode ?? e.status ?? null, code: e.error?.code ?? e.code ?? null });

// An app on 8081 that answers an Upgrade with 101 and then echoes in capitals, reached
// through the endpoint with a raw Upgrade request (as a WebSocket client opens one): what
// came back after the 101.
const echo_app = `
import socket, sys
l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind(("127.0.0.1", 8081)); l.listen(4)
while True:
    c, _ = l.accept(); head = b""
    while b"\\r\\n\\r\\n" not in head: head += c.recv(4096)
    c.sendall(b"HTTP/1.1 101 Switching Protocols\\r\\nUpgrade: websocket\\r\\nConnection: Upgrade\\r\\n\\r\\n")
    while True:
        d = c.recv(4096)
        if not d: break
        c.sendall(d.upper())
    c.close()
`;
async function upgraded(sbx) {
  await sbx.files.writeFiles([{ path: "/workspace/echo.py", data: echo_app }]);
  await sbx.commands.run("exec python3 /workspace/echo.py", { background: true });
  const endpoint = await sbx.getEndpoint(8081);
  const slash = endpoint.endpoint.indexOf("/");
  const [host, port] = endpoint.endpoint.slice(0, slash).split(":");
  const path = endpoint.endpoint.slice(slash) + "/";
  for (let attempt = 0; attempt < 50; attempt++) {
    const got = await new Promise((resolve) => {
      const socket = require("net").connect(Number(port), host, () => {
        let head = `GET ${path} HTTP/1.1\r\nHost: ${host}:${port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n`;
        for (const [k, v] of Object.entries(endpoint.headers || {})) head += `${k}: ${v}\r\n`;
        socket.write(head + "\r\n");
      });
      let data = "";
      socket.on("data", (chunk) => {
        data += chunk.toString();
        if (data.startsWith("HTTP/1.1 101") && data.includes("\r\n\r\n") && !data.includes("hello")) {
          if (!socket.sent) { socket.sent = true; socket.write("hello"); }
        }
        if (data.includes("HELLO") || !data.startsWith("HTTP/1.1 101")) socket.end();
      });
      socket.on("close", () => resolve(data));
      socket.on("error", () => resolve(""));
    });
    if (got.startsWith("HTTP/1.1 101")) return got.slice(got.indexOf("\r\n\r\n") + 4);
    await new Promise((r) => setTimeout(r, 100));
  }
  return null;
}

async function create(image) {
  const sbx = await Sandbox.create({
    connectionConfig: connectionConfig(),
    image,
    timeoutSeconds: 900,
    metadata: { team: "dg-test", purpose: "probe" },
  });
  const out = { id: sbx.id };
  // The seed's flow: a probe written by one command is read by the next.
  const put = await sbx.commands.run("echo probe-$((40 + 2)) > /workspace/probe.txt");
  out.put_exit = put.exitCode ?? 0;
  const get = await sbx.commands.run("cat /workspace/probe.txt");
  out.get = text(get);
  const failed = await sbx.commands.run("echo half; exit 3");
  out.failed = { exit: failed.exitCode, stdout: text(failed) };
  const streamed = [];
  await sbx.commands.run("for i in 1 2 3; do echo line-$i; sleep 0.2; done", {}, {
    onStdout: (m) => streamed.push(m.text),
  });
  out.streamed = streamed.join("");
  await sbx.files.writeFiles([{ path: "/workspace/notes/a.txt", data: "hello from the SDK" }]);
  out.read = await sbx.files.readFile("/workspace/notes/a.txt");
  out.cat = text(await sbx.commands.run("cat /workspace/notes/a.txt"));
  // A bash session keeps its variables and its directory between commands.
  const shell = await sbx.commands.createSession({ workingDirectory: "/workspace" });
  await sbx.commands.runInSession(shell, "export GREETING=hi; cd notes");
  out.session = text(await sbx.commands.runInSession(shell, 'echo "$GREETING $(pwd)"'));
  await sbx.commands.deleteSession(shell);
  // An app on port 8080, started as a background command, reached through the endpoint
  // the SDK is given (the proxy path, its headers carrying the sandbox's token).
  const app = await sbx.commands.run(
    "cd /workspace && exec python3 -m http.server 8080 --bind 127.0.0.1", { background: true });
  out.app_running = (await sbx.commands.getCommandStatus(app.id)).running;
  const endpoint = await sbx.getEndpoint(8080);
  for (let i = 0; i < 100 && out.app === undefined; i++) {
    const answer = await fetch(`http://${endpoint.endpoint}/notes/a.txt`, { headers: endpoint.headers || {} });
    if (answer.status === 200) out.app = await answer.text();
    else await new Promise((r) => setTimeout(r, 100));
  }
  out.app_without_token = (await fetch(`http://${endpoint.endpoint}/notes/a.txt`)).status;
  out.websocket = await upgraded(sbx);
  await sbx.commands.interrupt(app.id);
  out.app_after_interrupt = (await sbx.commands.getCommandStatus(app.id)).running;
  out.state = (await sbx.getInfo()).status.state;
  // PATCH …/metadata: a merge (null removes a key).
  out.patched = (await sbx.patchMetadata({ purpose: null, stage: "two" })).metadata;
  out.renewed = Boolean((await sbx.renew(1800)).expiresAt);
  const manager = SandboxManager.create({ connectionConfig: connectionConfig() });
  const listed = await manager.listSandboxInfos({ metadata: { team: "dg-test" } });
  out.listed = listed.sandboxInfos
    ? listed.sandboxInfos.map((s) => s.id)
    : (listed.items || []).map((s) => s.id);
  await manager.close();
  await sbx.close();
  return out;
}

// The AIStor example's flow: the bucket prefix named by a host volume under the
// operator's root, mounted by dockgate-mount and bound at /workspace by the gate.
async function volume(image, path) {
  let sbx;
  try {
    sbx = await Sandbox.create({
      connectionConfig: connectionConfig(),
      image,
      timeoutSeconds: 900,
      volumes: [{ name: "ws", host: { path }, mountPath: "/workspace" }],
    });
  } catch (e) {
    return { refused: failure(e), message: e.error?.message ?? String(e.message) };
  }
  const out = { id: sbx.id };
  out.put_exit = (await sbx.commands.run("echo aimem-$((6 * 7)) > /workspace/probe.txt")).exitCode ?? 0;
  out.get = text(await sbx.commands.run("cat /workspace/probe.txt"));
  await sbx.kill();
  await sbx.close();
  return out;
}

async function step(name, id) {
  const sbx = await Sandbox.connect({ connectionConfig: connectionConfig(), sandboxId: id, skipHealthCheck: name !== "kill" });
  try {
    if (name === "pause") {
      await sbx.pause();
      return { state: (await sbx.getInfo()).status.state };
    }
    if (name === "resume") {
      const back = await sbx.resume();
      const out = { state: (await back.getInfo()).status.state, probe: text(await back.commands.run("cat /workspace/probe.txt")) };
      await back.close();
      return out;
    }
    if (name === "info") {
      const manager = SandboxManager.create({ connectionConfig: connectionConfig() });
      const listed = await manager.listSandboxInfos({ states: ["Paused"] });
      await manager.close();
      const items = listed.sandboxInfos || listed.items || [];
      return { state: (await sbx.getInfo()).status.state, paused: items.map((s) => s.id) };
    }
    if (name === "read") return { probe: text(await sbx.commands.run("cat /workspace/probe.txt")) };
    if (name === "kill") {
      await sbx.kill();
      return { killed: true };
    }
    if (name === "escapes") {
      const out = {};
      await sbx.commands.run("ln -s /etc /workspace/etc-link");
      for (const [label, path] of [["outside", "/etc/passwd"], ["dotdot", "/workspace/../etc/passwd"], ["symlink", "/workspace/etc-link/passwd"]]) {
        try {
          await sbx.files.readFile(path);
          out[label] = "read";
        } catch (e) {
          out[label] = failure(e);
        }
      }
      return out;
    }
    throw new Error("unknown step " + name);
  } finally {
    await sbx.close();
  }
}

// A sandbox whose entrypoint is its own program (the sandbox stays, for the test to look).
async function entrypoint(image) {
  const sbx = await Sandbox.create({
    connectionConfig: connectionConfig(),
    image,
    entrypoint: ["sleep", "12345"],
    timeoutSeconds: 900,
  });
  const out = { id: sbx.id, entrypoint: (await sbx.getInfo()).entrypoint };
  await sbx.close();
  return out;
}

// A sandbox with a probe in its workspace, written by a command (the sandbox stays).
async function probe(image) {
  const sbx = await Sandbox.create({ connectionConfig: connectionConfig(), image, timeoutSeconds: 900 });
  const out = { id: sbx.id };
  out.put_exit = (await sbx.commands.run("echo dormant-$((6 * 7)) > /workspace/probe.txt")).exitCode ?? 0;
  await sbx.close();
  return out;
}

const [name, arg, more] = process.argv.slice(2);
(name === "create"
  ? create(arg)
  : name === "volume"
    ? volume(arg, more)
    : name === "entrypoint"
      ? entrypoint(arg)
      : name === "probe"
        ? probe(arg)
        : step(name, arg))
  .then((out) => console.log(JSON.stringify(out)))
  .catch((e) => {
    console.log(JSON.stringify({ error: String(e && e.message), ...failure(e) }));
    process.exit(1);
  });
