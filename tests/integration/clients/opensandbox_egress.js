// OpenSandbox's own JS SDK (scripts/node-clients.sh) and a sandbox's networkPolicy under
// SANDBOX_NETWORK=allowlist (docs/opensandbox-api.md, "networkPolicy"):
//   node opensandbox_egress.js IMAGE URL
// creates a sandbox allowed a.example only, fetches URL from inside it (through its
// HTTP_PROXY), reads its policy back through the egress API (getEgressPolicy), tries to
// change it (patchEgressRules: refused, the policy unchanged), asks for a sandbox beyond the operator's list
// (refused), and kills the first. Prints one JSON object.
"use strict";
const { Sandbox, ConnectionConfig } = require("@alibaba-group/opensandbox");

const connectionConfig = () =>
  new ConnectionConfig({ useServerProxy: true, disableMetrics: true, requestTimeoutSeconds: 60 });
const failure = (e) => ({ status: e.statusCode ?? e.status ?? null, code: e.error?.code ?? e.code ?? null });

async function main(image, url) {
  const sbx = await Sandbox.create({
    connectionConfig: connectionConfig(),
    image,
    timeoutSeconds: 600,
    networkPolicy: { egress: [{ action: "allow", target: "a.example" }] },
  });
  const out = { id: sbx.id };
  const fetched = await sbx.commands.run(
    `python3 -c "import os, urllib.request as u; o = u.build_opener(u.ProxyHandler({'http': os.environ['HTTP_PROXY']})); print(o.open('${url}', timeout=10).read().decode())"`);
  out.fetched = fetched.logs.stdout.map((m) => m.text).join("");
  out.policy = await sbx.getEgressPolicy();
  try {
    await sbx.patchEgressRules([{ action: "allow", target: "b.example" }]);
    out.patch = "accepted";
  } catch (e) {
    out.patch = { ...failure(e), message: String(e && e.message) };
  }
  out.policy_after = await sbx.getEgressPolicy();
  try {
    await Sandbox.create({
      connectionConfig: connectionConfig(),
      image,
      networkPolicy: { egress: [{ action: "allow", target: "elsewhere.example" }] },
    });
    out.wider = "created";
  } catch (e) {
    out.wider = failure(e);
  }
  await sbx.kill();
  return out;
}

main(process.argv[2], process.argv[3])
  .then((out) => console.log(JSON.stringify(out)))
  .catch((e) => {
    console.log(JSON.stringify({ error: String(e && e.message), ...failure(e) }));
    process.exit(1);
  });
