import fs from 'node:fs';
import path from 'node:path';
import { TestCluster, temporalAddress } from '../support/cluster';
import { runCli } from '../support/run-cli';

/**
 * An operator's CLI answers in well under a second: each command loads only what it needs (cli/main.ts). Not a
 * timed test (figures: docs/cli-startup.md); it reads which modules a real `durable-csi` process loaded.
 */
describe('durable-csi loads only what the command needs', () => {
  const cluster = new TestCluster('cli-startup');
  afterAll(() => cluster.teardown());
  const recorder = path.join(cluster.root, 'record-modules.js');
  const WORKER = ['@temporalio/worker', '@temporalio/core-bridge', 'webpack'];

  /** Runs the CLI with a preload that writes every module file it loaded, at exit. */
  const loadedBy = async (...args: string[]) => {
    const out = path.join(cluster.root, `modules-${Date.now()}.txt`);
    const env = { ...process.env, NODE_OPTIONS: `--require ${recorder}`, RECORD_MODULES_TO: out };
    const result = await runCli(args, { env });
    expect({ args, code: result.code, stderr: result.stderr }).toEqual({ args, code: 0, stderr: '' });
    return fs.readFileSync(out, 'utf8');
  };
  const packages = (loaded: string) =>
    new Set([...loaded.matchAll(/node_modules\/((?:@[^/]+\/)?[^/]+)\//g)].map((match) => match[1]!));

  beforeAll(async () => {
    fs.writeFileSync(
      recorder,
      "process.on('exit', () => require('fs').writeFileSync(process.env.RECORD_MODULES_TO, Object.keys(require.cache).join('\\n')));\n",
    );
    await cluster.startNode('node-1');
  });

  it('volumes create, list and delete load neither the worker nor the Temporal client', async () => {
    const endpoint = (await cluster.startController()).endpoint;
    for (const args of [['create', 'quick', '--size', '1Mi'], ['list'], ['delete', 'not-a-volume']]) {
      const loaded = packages(await loadedBy('volumes', '--endpoint', endpoint, ...args));
      expect(loaded.has('@grpc/grpc-js')).toBe(true); // the recorder works
      for (const heavy of [...WORKER, '@temporalio/client'])
        expect({ args, heavy, loaded: loaded.has(heavy) }).toEqual({ args, heavy, loaded: false });
    }
  });

  it('volumes stuck loads the client but not the worker; --version loads no command', async () => {
    const stuck = packages(
      await loadedBy('volumes', 'stuck', '--driver-name', cluster.driverName, '--temporal-address', temporalAddress()),
    );
    expect(stuck.has('@temporalio/client')).toBe(true);
    for (const heavy of WORKER) expect({ heavy, loaded: stuck.has(heavy) }).toEqual({ heavy, loaded: false });

    const version = await loadedBy('--version');
    expect(version).not.toMatch(/dist\/cli\/(volumes|controller|node|nodes|dev)-command\.js/);
  });
});
