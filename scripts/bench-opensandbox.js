// One round of scripts/bench-sidecar.sh's OpenSandbox rows: OpenSandbox's own JS SDK
// (@alibaba-group/opensandbox, scripts/node-clients.sh; NODE_PATH) against the sidecar's
// OpenSandbox front, timed inside this process with performance.now() so node's start-up
// and the SDK's loading are not in the figures:
//
//   node bench-opensandbox.js PORT IMAGE KEY HEAVY_COMMAND
//     -> {"create_ms":…, "first_ms":…, "heavy_ms":…, "heavy_exit":…, "first":"1\n"}
//
// create_ms: Sandbox.create with useServerProxy and the SDK's default body (it waits for
// both endpoint GETs and execd's /ping); first_ms: from before Sandbox.create to the first
// commands.run("echo 1") output; heavy_ms: then one commands.run(HEAVY_COMMAND). The
// sandbox is killed after the figures are taken.
"use strict";
const { performance } = require("node:perf_hooks");
const { Sandbox, ConnectionConfig } = require("@alibaba-group/opensandbox");

async function main() {
  const [port, image, key, heavy] = process.argv.slice(2);
  const connectionConfig = new ConnectionConfig({
    domain: `127.0.0.1:${port}`,
    apiKey: key,
    useServerProxy: true,
    disableMetrics: true,
  });
  const text = (execution) => execution.logs.stdout.map((m) => m.text).join("");
  const t0 = performance.now();
  const sbx = await Sandbox.create({ connectionConfig, image });
  const t1 = performance.now();
  const first = await sbx.commands.run("echo 1");
  const t2 = performance.now();
  const heavyRun = await sbx.commands.run(heavy);
  const t3 = performance.now();
  await sbx.kill();
  await sbx.close();
  return {
    create_ms: t1 - t0,
    first_ms: t2 - t0,
    heavy_ms: t3 - t2,
    heavy_exit: heavyRun.exitCode ?? 0,
    first: text(first),
  };
}

main().then(
  (out) => console.log(JSON.stringify(out)),
  (e) => {
    console.error(e);
    process.exit(1);
  },
);
