// One round of scripts/bench-sidecar.sh's OpenSandbox rows: OpenSandbox's own JS SDK
// (@alibaba-group/opensandbox, scripts/node-clients.sh; NODE_PATH) against the sidecar's
// OpenSandbox front, timed inside this process with performance.now() so node's start-up
// and the SDK's loading are not in the figures:
//
//   node bench-opensandbox.js PORT IMAGE KEY HEAVY_COMMAND [CELL]
//     -> {"create_ms":…, "first_ms":…, "heavy_ms":…, "heavy_exit":…, "first":"1\n",
//         "phases": {"client_ms":…, "post_ms":…, "endpoints_ms":…, "ready_ms":…, "pings":…},
//         "context_ms":…, "cell_ms":…, "cell_warm":"False", "cell_error":null}
//
// CELL given: after the heavy command, a /code context (POST /code/context, the
// code-interpreter SDK's request: tests/integration/clients/opensandbox_code.js) and its
// first cell, "import sys; _w = 'pandas' in sys.modules" then CELL then "_w": context_ms the
// context's creation (its kernel started), cell_ms that first cell, cell_warm whether the
// kernel had pandas imported before the cell asked for it.
//
// create_ms: Sandbox.create with useServerProxy and the SDK's default body (it waits for
// both endpoint GETs and execd's /ping); first_ms: from before Sandbox.create to the first
// commands.run("echo 1") output; heavy_ms: then one commands.run(HEAVY_COMMAND). One
// untimed list goes first (see main); the sandbox is killed after the figures are taken.
// `phases` splits Sandbox.create by the SDK's own requests (fetch wrapped, time to the
// answer's headers): the SDK's work before its POST (client_ms), POST /v1/sandboxes, the
// two endpoint GETs, and the wait for execd (every GET /ping and the SDK's sleeps between
// them; pings: how many it sent).
"use strict";
const { performance } = require("node:perf_hooks");
const { Sandbox, SandboxManager, ConnectionConfig } = require("@alibaba-group/opensandbox");

// Every request the SDK makes, with the time its answer's headers came (the SDK's fetch is
// the global one, taken when its connection config first sends).
const trace = [];
const realFetch = globalThis.fetch;
globalThis.fetch = async (input, init) => {
  const url = new URL(typeof input === "string" || input instanceof URL ? input : input.url);
  const method = init?.method ?? (typeof input === "object" && input.method) ?? "GET";
  const start = performance.now();
  const answer = await realFetch(input, init);
  trace.push({ method, path: url.pathname, start, end: performance.now() });
  return answer;
};

function phases(t0, t1) {
  const created = trace.filter((r) => r.end <= t1);
  const post = created.find((r) => r.method === "POST" && r.path.endsWith("/sandboxes"));
  const endpoints = created.filter((r) => r.path.includes("/endpoints/"));
  const pings = created.filter((r) => r.path.endsWith("/ping"));
  const lastEndpoint = Math.max(...endpoints.map((r) => r.end));
  return {
    client_ms: post.start - t0,
    post_ms: post.end - post.start,
    endpoints_ms: lastEndpoint - post.end,
    ready_ms: t1 - lastEndpoint,
    pings: pings.length,
  };
}

async function main() {
  const [port, image, key, heavy, cell] = process.argv.slice(2);
  const config = () =>
    new ConnectionConfig({
      domain: `127.0.0.1:${port}`,
      apiKey: key,
      useServerProxy: true,
      disableMetrics: true,
    });
  // One untimed request first: the SDK imports its HTTP client (undici) at a process's
  // first request, about 100 ms that a long-lived client pays once, as node's start-up.
  // The timed create has a config, and so connections, of its own.
  const manager = SandboxManager.create({ connectionConfig: config() });
  await manager.listSandboxInfos({});
  await manager.close();
  const connectionConfig = config();
  const text = (execution) => execution.logs.stdout.map((m) => m.text).join("");
  const t0 = performance.now();
  const sbx = await Sandbox.create({ connectionConfig, image });
  const t1 = performance.now();
  const first = await sbx.commands.run("echo 1");
  const t2 = performance.now();
  const heavyRun = await sbx.commands.run(heavy);
  const t3 = performance.now();
  const figures = {
    create_ms: t1 - t0,
    first_ms: t2 - t0,
    heavy_ms: t3 - t2,
    heavy_exit: heavyRun.exitCode ?? 0,
    first: text(first),
    phases: phases(t0, t1),
  };
  if (cell) {
    const { codes } = require("../tests/integration/clients/opensandbox_code.js");
    const c = await codes(sbx);
    const t4 = performance.now();
    const context = await c.createContext("python");
    const t5 = performance.now();
    const ran = await c.run(`import sys\n_w = 'pandas' in sys.modules\n${cell}\n_w`, { context });
    const t6 = performance.now();
    figures.context_ms = t5 - t4;
    figures.cell_ms = t6 - t5;
    figures.cell_warm = ran.result.map((r) => r.text).join("");
    figures.cell_error = ran.error ? `${ran.error.name}: ${ran.error.value}` : null;
  }
  await sbx.kill();
  await sbx.close();
  return figures;
}

main().then(
  (out) => console.log(JSON.stringify(out)),
  (e) => {
    console.error(e);
    process.exit(1);
  },
);
