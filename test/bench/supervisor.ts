import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { devLayout } from '../../agent/dev-layout';
import { CLI_MAIN } from '../../agent/spawn-cli';
import { connectCsi } from '../../csi/client';
import { findFreePort } from '../../temporal-dev/free-port';
import { runDurableLevel, type PoolView } from './durable';
import { idleResident } from './idle';
import { CostMeter } from './phase-cost';
import { ProcessWatch, type ResidentMb } from './process-usage';
import type { LevelResult } from './report';

export interface SupervisorResult {
  nodes: number;
  /** RSS of the supervisor after the settle, and its CPU meanwhile. */
  idle: { resident?: ResidentMb; cpuMsPerSecond?: number };
  concurrency: number;
  operations: number;
  /** The supervisor's CPU per create+delete pair while its stack served them. */
  cpuMsPerPair: number;
  peakRssMb?: number;
}

const UP_LINE = 'durable-csi dev stack is up';
const START_TIMEOUT_MS = 180_000;

/**
 * The fourth role: `durable-csi dev`, the supervisor of a whole dev stack (its own dev server, controller and
 * node agents), measured alone while its stack is idle and while it serves `ops` creates then deletes.
 */
export async function runSupervisor(
  options: { nodes: number; ops: number; concurrency: number; settleMs: number; rpcTimeoutMs: number },
  runId: string,
  onLevel: (level: LevelResult) => void,
  progress: (message: string) => void,
): Promise<SupervisorResult> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'durable-csi-bench-dev-'));
  const layout = devLayout(dataDir);
  const args = ['dev', '--data-dir', dataDir, '--nodes', String(options.nodes), '--capacity', '1Ti'];
  args.push('--port', String(await findFreePort()), '--ui-port', String(await findFreePort()));
  args.push('--metrics-port', String(await findFreePort()));
  progress(`supervisor: durable-csi ${args.join(' ')}`);
  const supervisor = spawn(process.execPath, [CLI_MAIN, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  supervisor.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  supervisor.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<void>((resolve) => supervisor.once('exit', () => resolve()));
  const clients = connectCsi(`unix://${layout.controllerSocket}`);
  try {
    await waitForUp(() => output, exited);
    const watch = new ProcessWatch();
    watch.add({ name: 'supervisor', group: 'supervisor', pid: supervisor.pid ?? 0 });
    const idle = await idleResident(watch, options.settleMs);
    const nodes = Array.from({ length: options.nodes }, (_, index) => `node-${index + 1}`);
    const pools: PoolView = {
      pool: (nodeId) => layout.pool(nodeId),
      volumesOnDisk: (nodeId) => {
        const dir = path.join(layout.pool(nodeId), 'volumes');
        return fs.existsSync(dir) ? fs.readdirSync(dir).sort() : [];
      },
    };
    const target = { cluster: pools, clients, nodes, rpcTimeoutMs: options.rpcTimeoutMs, retryBudgetMs: 300_000 };
    const level = await runDurableLevel(
      { ...target, topology: 'node' },
      new CostMeter(watch, undefined),
      `${runId}-dev`,
      options.concurrency,
      options.ops,
    );
    onLevel(level);
    const cost = level.cost;
    const perOp = (phase: { operations: number; usage: { cpuMs: Record<string, number> } } | undefined) =>
      phase && phase.operations > 0 ? (phase.usage.cpuMs.supervisor ?? 0) / phase.operations : NaN;
    return {
      nodes: options.nodes,
      idle: { resident: idle.resident.supervisor, cpuMsPerSecond: idle.cpuMsPerSecond.supervisor },
      concurrency: options.concurrency,
      operations: options.ops,
      cpuMsPerPair: perOp(cost?.create) + perOp(cost?.delete),
      peakRssMb: Math.max(cost?.create.usage.peakRssMb.supervisor ?? 0, cost?.delete.usage.peakRssMb.supervisor ?? 0),
    };
  } finally {
    clients.close();
    supervisor.kill('SIGTERM');
    const stopped = await Promise.race([exited.then(() => true), sleep(60_000).then(() => false)]);
    if (!stopped) {
      progress('supervisor: not stopped 60 s after SIGTERM; killing it');
      supervisor.kill('SIGKILL');
    }
    if (process.env.DURABLE_CSI_KEEP_TEST_DATA) progress(`kept the dev stack's data in ${dataDir}`);
    else fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

async function waitForUp(output: () => string, exited: Promise<void>): Promise<void> {
  let gone = false;
  void exited.then(() => (gone = true));
  const until = Date.now() + START_TIMEOUT_MS;
  while (!output().includes(UP_LINE)) {
    if (gone) throw new Error(`durable-csi dev exited before it was up:\n${output().slice(-2000)}`);
    if (Date.now() > until) throw new Error(`durable-csi dev not up after ${START_TIMEOUT_MS / 1000} s:\n${output()}`);
    await sleep(200);
  }
}
