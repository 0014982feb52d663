// Everyday dockerode operations against a unix socket. Prints one JSON object of what
// each step saw, so that a run straight at the daemon and one through the gate can be
// compared. Usage: node dockerode.js SOCKET IMAGE NAME_PREFIX
'use strict';
const Docker = require('dockerode');
const { PassThrough } = require('stream');

const [socketPath, image, prefix] = process.argv.slice(2);
const docker = new Docker({ socketPath, timeout: 60000 });
const seen = {};

async function step(name, fn) {
  try {
    seen[name] = await fn();
  } catch (e) {
    seen[name] = 'error: ' + String((e && (e.json && e.json.message)) || e).slice(0, 300);
  }
}

function collect(stream, modem) {
  // Demultiplexed stdout and stderr of a non-TTY stream, until it ends.
  return new Promise((resolve, reject) => {
    const out = new PassThrough(), err = new PassThrough();
    let o = '', e = '';
    out.on('data', (d) => (o += d));
    err.on('data', (d) => (e += d));
    modem.demuxStream(stream, out, err);
    stream.on('end', () => resolve({ stdout: o, stderr: e }));
    stream.on('error', reject);
  });
}

(async () => {
  const since = Math.floor(Date.now() / 1000) - 1;
  await step('ping', async () => String(await docker.ping()));
  // attach with stdin (hijacked), then start: the input comes back, then EOF ends cat.
  await step('attach_stdin', async () => {
    const c = await docker.createContainer({
      Image: image, name: prefix + '-cat', Cmd: ['sh', '-c', 'cat; echo done'],
      OpenStdin: true, StdinOnce: true, AttachStdin: true, AttachStdout: true, AttachStderr: true, Tty: false,
    });
    const stream = await c.attach({ stream: true, stdin: true, stdout: true, stderr: true, hijack: true });
    const done = collect(stream, docker.modem);
    await c.start();
    stream.end('hello\n');
    const got = await done;
    const waited = await c.wait();
    await c.remove();
    return { got, status: waited.StatusCode };
  });
  const box = await docker.createContainer({ Image: image, name: prefix + '-box', Cmd: ['sleep', '60'] });
  await box.start();
  await step('exec_demux', async () => {
    const exec = await box.exec({ Cmd: ['sh', '-c', 'echo o; echo e >&2; exit 2'], AttachStdout: true, AttachStderr: true });
    const stream = await exec.start({ hijack: true, stdin: false });
    const got = await collect(stream, docker.modem);
    return { got, exit: (await exec.inspect()).ExitCode };
  });
  await step('logs_follow', async () => {
    const c = await docker.createContainer({ Image: image, name: prefix + '-talk', Cmd: ['sh', '-c', 'echo a; sleep 1; echo b'] });
    await c.start();
    const stream = await c.logs({ follow: true, stdout: true, stderr: true });
    const got = await collect(stream, docker.modem);
    await c.wait();
    await c.remove();
    return got;
  });
  await step('list', async () => (await docker.listContainers({ all: true, filters: { name: [prefix + '-box'] } })).map((c) => c.Names[0]));
  await step('stop', async () => (await box.stop({ t: 0 }), (await box.inspect()).State.Status));
  await step('start_again', async () => (await box.start(), (await box.inspect()).State.Status));
  await step('kill', async () => (await box.kill(), (await box.wait()).StatusCode));
  await step('remove', async () => (await box.remove({ force: true }), 'removed'));
  await step('gone', async () => (await docker.listContainers({ all: true, filters: { name: [prefix] } })).length);
  await step('events', async () => {
    const until = Math.floor(Date.now() / 1000) + 1;
    const stream = await docker.getEvents({ since, until, filters: { container: [prefix + '-box'] } });
    let text = '';
    for await (const chunk of stream) text += chunk;
    return [...new Set(text.split('\n').filter(Boolean).map((l) => JSON.parse(l).status))].sort();
  });
  const sorted = {};
  for (const k of Object.keys(seen).sort()) sorted[k] = seen[k];
  console.log(JSON.stringify(sorted));
})().catch((e) => {
  console.log(JSON.stringify({ fatal: String(e) }));
  process.exit(1);
});
