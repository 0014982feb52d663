// OpenSandbox's code interpreter (execd's /code) against dockgate-sidecar's OpenSandbox front.
// The code-interpreter SDK (@alibaba-group/opensandbox-code-interpreter) is not on the npm
// registry (404 for every version), so its `codes` service is re-made here request for
// request from its source (sdks/code-interpreter/javascript/src/adapters/codesAdapter.ts:
// the same paths, bodies, headers and event parsing), over the sandbox SDK's public API
// (@alibaba-group/opensandbox 0.1.11: Sandbox, getEndpoint, commands,
// ExecutionEventDispatcher, which that adapter also uses). One step per run:
//   node opensandbox_code.js run IMAGE       -> the sandbox (it stays), a background app on
//                                               8080, a context and its cells, an interrupt,
//                                               the default context, a plain command, the app
//                                               still answering
//   node opensandbox_code.js delete ID CTX   -> the context deleted, the language's too
//   node opensandbox_code.js paused ID       -> what /code answers while the sandbox is paused
//   node opensandbox_code.js missing IMAGE   -> a context asked of an image without ipykernel
"use strict";
const { Sandbox, ConnectionConfig, ExecutionEventDispatcher } = require("@alibaba-group/opensandbox");

const connectionConfig = () =>
  new ConnectionConfig({ useServerProxy: true, disableMetrics: true, requestTimeoutSeconds: 60 });
const text = (execution) => execution.logs.stdout.map((m) => m.text).join("");

// codesAdapter.ts, its requests on the execd endpoint the sandbox SDK gives.
async function codes(sbx) {
  const ep = await sbx.getEndpoint(44772);
  const base = `http://${ep.endpoint}`;
  const key = sbx.connectionConfig?.apiKey ?? process.env.OPEN_SANDBOX_API_KEY;
  const headers = { ...(key ? { "OPEN-SANDBOX-API-KEY": key } : {}), ...(ep.headers || {}) };
  const call = async (method, path, body) => {
    const res = await fetch(base + path, {
      method,
      headers: { ...headers, ...(body ? { "content-type": "application/json" } : {}) },
      body: body ? JSON.stringify(body) : undefined,
    });
    const t = await res.text();
    if (!res.ok) {
      const e = new Error(`${method} ${path}: ${res.status} ${t}`);
      e.status = res.status;
      e.code = (() => { try { return JSON.parse(t).code; } catch { return null; } })();
      throw e;
    }
    return t ? JSON.parse(t) : undefined;
  };
  const q = (k, v) => `?${k}=${encodeURIComponent(v)}`;
  return {
    createContext: (language) => call("POST", "/code/context", { language }),
    getContext: (id) => call("GET", `/code/contexts/${encodeURIComponent(id)}`),
    listContexts: (language) => call("GET", "/code/contexts" + (language ? q("language", language) : "")),
    deleteContext: (id) => call("DELETE", `/code/contexts/${encodeURIComponent(id)}`),
    deleteContexts: (language) => call("DELETE", "/code/contexts" + q("language", language)),
    interrupt: (id) => call("DELETE", "/code" + q("id", id)),
    // run(): the body {code, context: {id, language}}, the stream split on lines, each a JSON
    // event (a "data:" prefix dropped), a non-2xx answer an error (sse.ts).
    async run(code, opts = {}) {
      const context = opts.context ?? (opts.language ? { language: opts.language } : { language: "python" });
      const body = opts.raw ?? { code, context: { id: context.id, language: context.language } };
      const res = await fetch(base + "/code", {
        method: "POST",
        headers: { accept: "text/event-stream", "content-type": "application/json", ...headers },
        body: JSON.stringify(body),
      });
      if (!res.ok) {
        const t = await res.text();
        const e = new Error(`POST /code: ${res.status} ${t}`);
        e.status = res.status;
        e.code = (() => { try { return JSON.parse(t).code; } catch { return null; } })();
        throw e;
      }
      const execution = { logs: { stdout: [], stderr: [] }, result: [] };
      const dispatcher = new ExecutionEventDispatcher(execution, opts.handlers);
      const decoder = new TextDecoder();
      let buf = "";
      const lines = async (final) => {
        let nl;
        while ((nl = buf.indexOf("\n")) >= 0 || (final && buf.length)) {
          const line = (nl >= 0 ? buf.slice(0, nl) : buf).trim();
          buf = nl >= 0 ? buf.slice(nl + 1) : "";
          if (!line || line.startsWith(":") || /^(event|id|retry):/.test(line)) continue;
          try {
            await dispatcher.dispatch(JSON.parse(line.startsWith("data:") ? line.slice(5).trim() : line));
          } catch {}
        }
      };
      for await (const chunk of res.body) {
        buf += decoder.decode(chunk, { stream: true });
        await lines(false);
      }
      await lines(true);
      return execution;
    },
  };
}

const failure = (e) => ({ status: e.status ?? null, code: e.code ?? null });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function run(image) {
  const sbx = await Sandbox.create({ connectionConfig: connectionConfig(), image, timeoutSeconds: 900 });
  const out = { id: sbx.id };
  // An app the client keeps between commands: it must outlive every /code run below.
  await sbx.commands.run("exec python3 -m http.server 8080 --bind 127.0.0.1 --directory /tmp",
    { background: true });
  const c = await codes(sbx);
  const ctx = await c.createContext("python");
  out.context = ctx.id;
  out.context_language = ctx.language;
  out.got = (await c.getContext(ctx.id)).id === ctx.id;
  await c.run("x = 41", { context: ctx });
  const answer = await c.run("x + 1", { context: ctx });
  out.result = answer.result.map((r) => r.text).join("|");
  out.execution_count = answer.executionCount;
  out.complete = !!answer.complete;
  const streamed = [];
  await c.run("import sys, time\nfor i in range(3):\n    print('line', i, flush=True)\n    time.sleep(0.2)\n" +
    "print('to stderr', file=sys.stderr)", {
    context: ctx,
    handlers: { onStdout: (m) => streamed.push(m.text) },
  });
  out.streamed = streamed.join("");
  const failed = await c.run("1 / 0", { context: ctx });
  out.error = failed.error ? `${failed.error.name}: ${failed.error.value}` : "none";
  out.traceback = failed.error ? failed.error.traceback.length > 0 : false;
  // A long cell interrupted from another request: the kernel survives with its state.
  const started = Date.now();
  const long = c.run("import time\ntime.sleep(60)", {
    context: ctx,
    handlers: { onInit: async () => { await sleep(300); await c.interrupt(ctx.id); } },
  });
  const interrupted = await long;
  out.interrupted = interrupted.error ? interrupted.error.name : "none";
  out.interrupt_fast = Date.now() - started < 20000;
  out.after_interrupt = (await c.run("x", { context: ctx })).result.map((r) => r.text).join("|");
  // A busy context refuses a second cell; the language's default context; a plain command.
  const busy = c.run("time.sleep(2)", { context: ctx });
  await sleep(500);
  out.busy = await c.run("1", { context: ctx }).then(() => "ran", (e) => e.status);
  await busy;
  out.default = (await c.run("'default'", { language: "python" })).result.map((r) => r.text).join("|");
  out.plain = text(await c.run("echo plain-$((1 + 1))", { raw: { code: "echo plain-$((1 + 1))" } }));
  out.ruby = await c.createContext("ruby").then(() => "made", (e) => `${e.status} ${e.code}`);
  out.unknown = await c.run("1", { context: { id: "0123abcd" } }).then(() => "ran", (e) => `${e.status} ${e.code}`);
  out.listed = (await c.listContexts("python")).length;
  // The app started by the background command still answers.
  const app = await sbx.getEndpoint(8080);
  const res = await fetch(`http://${app.endpoint}/`, { headers: app.headers || {} });
  out.app_after_code = res.status;
  await sbx.close();
  return out;
}

async function del(id, ctx) {
  const sbx = await Sandbox.connect({ connectionConfig: connectionConfig(), sandboxId: id });
  const c = await codes(sbx);
  await c.deleteContext(ctx);
  const out = {};
  out.after_delete = await c.getContext(ctx).then(() => "found", (e) => `${e.status} ${e.code}`);
  await c.deleteContexts("python");
  out.listed = (await c.listContexts()).length;
  await sbx.close();
  return out;
}

// Pause and kill while a cell runs: neither waits on it, and the cell's stream ends.
async function paused(id) {
  const sbx = await Sandbox.connect({ connectionConfig: connectionConfig(), sandboxId: id });
  const c = await codes(sbx);
  let inited;
  const init = new Promise((r) => { inited = r; });
  const long = c.run("import time\ntime.sleep(60)", { language: "python", handlers: { onInit: () => inited() } })
    .then((e) => (e.error ? e.error.name : e.complete ? "complete" : "cut"), (e) => `failed ${e.status ?? e.message}`);
  await init;
  const out = {};
  let started = Date.now();
  await sbx.pause();
  out.pause_fast = Date.now() - started < 5000;
  started = Date.now();
  out.code = await c.run("1", { language: "python" }).then(() => "ran", (e) => `${e.status}`);
  out.fast = Date.now() - started < 5000;
  started = Date.now();
  await sbx.kill();
  out.kill_fast = Date.now() - started < 10000;
  out.long = await long;
  out.long_ended_fast = Date.now() - started < 15000;
  await sbx.close();
  return out;
}

async function missing(image) {
  const sbx = await Sandbox.create({ connectionConfig: connectionConfig(), image, timeoutSeconds: 900 });
  const c = await codes(sbx);
  const started = Date.now();
  const out = { context: await c.createContext("python").then(() => "made", (e) => e.message) };
  out.fast = Date.now() - started < 30000;
  await sbx.kill();
  await sbx.close();
  return out;
}

// scripts/bench-opensandbox.js takes the same client.
module.exports = { codes };

if (require.main === module) {
  const [name, arg, more] = process.argv.slice(2);
  const steps = { run: () => run(arg), delete: () => del(arg, more), paused: () => paused(arg), missing: () => missing(arg) };
  steps[name]()
    .then((out) => console.log(JSON.stringify(out)))
    .catch((e) => {
      console.log(JSON.stringify({ error: String(e && e.message), ...failure(e) }));
      process.exit(1);
    });
}
