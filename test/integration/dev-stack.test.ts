import { Connection } from '@temporalio/client';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { CLI_MAIN } from '../../agent/spawn-cli';
import { waitUntilReady } from '../../agent/wait-ready';
import { temporalAddress } from '../support/cluster';
import { DevStackProcess } from '../support/dev-stack-process';
import { DEV_NODE_FLAGS } from '../../agent/dev-node-flags';
import { eventually } from '../support/eventually';

/**
 * `durable-csi dev` / `npm run dev` as real processes: every address it prints answers, and the whole stack
 * stops with nothing left whichever of its processes is signalled, or when its parent dies. "Nothing left" is
 * read from /proc: no live process whose command line names the stack's data dir.
 */
describe('the dev stack', () => {
  const stacks: DevStackProcess[] = [];
  const newStack = () => {
    const stack = new DevStackProcess();
    stacks.push(stack);
    return stack;
  };
  afterAll(() => stacks.forEach((stack) => stack.cleanup()));

  it('answers at every address it prints, and a node restarted by hand stops with it on SIGINT', async () => {
    const stack = newStack();
    stack.start(await stack.args(2));
    const banner = await stack.up();

    const temporal = /Temporal: +(\S+) \(namespace (\S+)\)/.exec(banner)!;
    const connection = await Connection.connect({ address: temporal[1]!, connectTimeout: 5000 });
    await connection.workflowService.describeNamespace({ namespace: temporal[2]! });
    await connection.close();
    const sockets = [...banner.matchAll(/(unix:\/\/\S+\.sock)/g)].map((match) => match[1]!);
    expect(sockets).toHaveLength(3);
    for (const socket of sockets) await waitUntilReady(socket, 5000);
    const ui = /Web UI: +(http\S+)/.exec(banner)![1]!;
    expect((await fetch(ui)).status).toBe(200);
    const metrics = /metrics: +(http:\/\/127\.0\.0\.1:(\d+)\/metrics) \(controller\), ports (\d+)\+ for the nodes/.exec(
      banner,
    )!;
    const firstNodePort = Number(metrics[3]);
    for (const url of [metrics[1]!, ...[0, 1].map((i) => `http://127.0.0.1:${firstNodePort + i}/metrics`)]) {
      const answer = await fetch(url);
      expect({ url, status: answer.status }).toEqual({ url, status: 200 });
      expect(await answer.text()).toContain('# HELP');
    }

    // node-2 stopped by hand is reported with the command that restarts it; restarted so, outside the stack...
    process.kill(stack.pidOf('--node-id node-2'), 'SIGTERM');
    const restart = await eventually(
      'the restart hint',
      () => /node-2 stopped \([^)]*\); to start it again: npx durable-csi (.+)\n/.exec(stack.output)?.[1],
      30_000,
    );
    const log = fs.openSync(path.join(stack.dataDir, 'node-2-by-hand.log'), 'a');
    const byHand = spawn(process.execPath, [CLI_MAIN, ...restart.split(' ')], { stdio: ['ignore', log, log] });
    fs.closeSync(log);
    await waitUntilReady(sockets[2]!, 60_000);

    // ... it stops with the stack: Ctrl-C's SIGINT to the dev process.
    process.kill(stack.child!.pid!, 'SIGINT');
    expect(await stack.exit).toEqual({ code: 0, signal: null });
    expect(stack.output).toContain('stopping node-2 too');
    await stack.nothingLeft();
    expect(byHand.exitCode ?? byHand.signalCode).not.toBeNull();
  });

  it('stops whole when `npm run dev` gets SIGTERM (npm and its shell die without passing it on)', async () => {
    const stack = newStack();
    stack.start(await stack.args(1), 'npm');
    await stack.up();
    expect(stack.processes().length).toBeGreaterThanOrEqual(4); // npm, its shell, the dev process, Temporal, ...
    process.kill(stack.child!.pid!, 'SIGTERM');
    await stack.nothingLeft();
  });

  it('stops whole when the dev process is killed outright (SIGKILL): its children watch it', async () => {
    const stack = newStack();
    stack.start(await stack.args(1));
    await stack.up();
    process.kill(stack.child!.pid!, 'SIGKILL');
    await stack.nothingLeft();
  });

  it('stops whole, exiting non-zero, when the Temporal server gets SIGTERM', async () => {
    const stack = newStack();
    stack.start(await stack.args(1));
    await stack.up();
    process.kill(stack.pidOf('server start-dev'), 'SIGTERM');
    expect(await stack.exit).toEqual({ code: 1, signal: null });
    expect(stack.output).toMatch(/stopping the dev stack: the Temporal server exited/);
    await stack.nothingLeft();
  });

  it('does not start when a process outside it holds one of its pools, and names that process', async () => {
    const stack = newStack();
    const args = await stack.args(2);
    const pool = path.join(stack.dataDir, 'pools', 'node-2');
    const endpoint = `unix://${path.join(stack.dataDir, 'sockets', 'node-2.sock')}`;
    const strayArgs = ['node', '--endpoint', endpoint, '--node-id', 'node-2', '--pool', pool, ...DEV_NODE_FLAGS];
    const log = fs.openSync(path.join(stack.dataDir, 'stray.log'), 'a');
    const stray = spawn(process.execPath, [CLI_MAIN, ...strayArgs, '--temporal-address', temporalAddress()], {
      stdio: ['ignore', log, log],
    });
    fs.closeSync(log);
    const strayExit = new Promise((resolve) => stray.once('exit', resolve));
    await waitUntilReady(endpoint, 60_000);

    stack.start(args);
    expect(await stack.exit).toEqual({ code: 1, signal: null });
    expect(stack.output).toContain(`node-2: pool ${pool} is in use by process ${stray.pid}`);
    expect(stack.output).toContain(`kill ${stray.pid}`);
    expect(stack.processes().map((entry) => entry.pid)).toEqual([stray.pid]);
    stray.kill('SIGTERM');
    await strayExit;
  });
});
