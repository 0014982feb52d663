// testcontainers (npm) with a busybox container, as a test suite would use it: start and
// wait for a log line, exec, read logs, copy a file in and out, stop. Prints one JSON
// object of what each step saw, for comparing a run straight at the daemon with one
// through the gate. Usage (DOCKER_HOST set): node testcontainers.js IMAGE
// Ryuk (the reaper) is an image from Docker Hub: disabled (TESTCONTAINERS_RYUK_DISABLED).
'use strict';
const { GenericContainer, Wait } = require('testcontainers');

const [image] = process.argv.slice(2);
const seen = {};

async function step(name, fn) {
  try {
    seen[name] = await fn();
  } catch (e) {
    seen[name] = 'error: ' + String((e && e.message) || e).slice(0, 300);
  }
}

(async () => {
  let container;
  await step('start', async () => {
    container = await new GenericContainer(image)
      .withCommand(['sh', '-c', 'echo ready; exec sleep 60'])
      .withLabels({ 'test.client': 'testcontainers' })
      .withEnvironment({ GREETING: 'hello' })
      .withCopyContentToContainer([{ content: 'copied in\n', target: '/tmp/in.txt' }])
      .withWaitStrategy(Wait.forLogMessage('ready'))
      .withStartupTimeout(30000)
      .start();
    return 'started';
  });
  if (!container) {
    console.log(JSON.stringify(seen));
    process.exit(1);
  }
  await step('exec', async () => {
    const r = await container.exec(['sh', '-c', 'echo $GREETING; cat /tmp/in.txt; echo err >&2; exit 3']);
    return { exitCode: r.exitCode, output: r.output };
  });
  await step('logs', async () => {
    const stream = await container.logs();
    return await new Promise((resolve) => {
      let text = '';
      stream.on('data', (d) => (text += d));
      setTimeout(() => { stream.destroy(); resolve(text.trim()); }, 500);
    });
  });
  await step('copy_out', async () => {
    const archive = await container.copyArchiveFromContainer('/tmp/in.txt');
    let bytes = 0;
    for await (const chunk of archive) bytes += chunk.length;
    return bytes > 0;
  });
  await step('host', async () => container.getHost());
  await step('stop', async () => {
    await container.stop({ timeout: 1 });
    return 'stopped';
  });
  console.log(JSON.stringify(seen));
})().catch((e) => {
  console.log(JSON.stringify({ fatal: String(e) }));
  process.exit(1);
});
