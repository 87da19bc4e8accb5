import type { ChildProcess } from 'node:child_process';
import path from 'node:path';
import { devLayout } from '../cli/dev-layout';
import { DEFAULT_DRIVER_NAME } from '../common/names';
import { startDevServer } from '../temporal-dev/dev-server';
import { spawnCli, stopChild } from './spawn-cli';
import { waitUntilReady } from './wait-ready';

export interface DevStackOptions {
  dataDir: string;
  nodeCount: number;
  capacity: string;
  port: number;
  uiPort: number;
  /** The controller's metrics port; node agents take the ports after it. */
  metricsPort: number;
}

/**
 * The embedded default: Temporal dev server (SQLite under dataDir), one controller and N node agents, each its
 * own process as in a cluster. Everything persists under dataDir, so a restart keeps every volume.
 */
export async function runDevStack(options: DevStackOptions): Promise<void> {
  const layout = devLayout(options.dataDir);
  const server = await startDevServer({ dataDir: layout.temporal, port: options.port, uiPort: options.uiPort });
  const temporal = ['--temporal-address', server.address, '--temporal-namespace', server.namespace];
  const metricsAt = (index: number) => `127.0.0.1:${options.metricsPort + index}`;
  const children: ChildProcess[] = [];
  let stopping = false;
  const stopAll = async () => {
    stopping = true;
    await Promise.all(children.map((child) => stopChild(child)));
    await server.stop();
  };
  const start = (name: string, args: string[]) => {
    const child = spawnCli(args, path.join(layout.logs, `${name}.log`));
    child.once('exit', (code, signal) => {
      if (stopping) return;
      const how = signal ?? `code ${String(code)}`;
      process.stdout.write(`${name} stopped (${how}); to start it again: npx durable-csi ${args.join(' ')}\n`);
    });
    children.push(child);
  };
  try {
    const controllerEndpoint = `unix://${layout.controllerSocket}`;
    start('controller', [
      'controller',
      '--endpoint',
      controllerEndpoint,
      '--driver-name',
      DEFAULT_DRIVER_NAME,
      ...temporal,
    ]);
    const nodes = Array.from({ length: options.nodeCount }, (_, index) => `node-${index + 1}`);
    for (const nodeId of nodes) {
      const args = ['node', '--endpoint', `unix://${layout.nodeSocket(nodeId)}`, '--node-id', nodeId];
      args.push('--backend', 'dir', '--pool', layout.pool(nodeId), '--capacity', options.capacity, ...temporal);
      args.push('--metrics-address', metricsAt(nodes.indexOf(nodeId) + 1));
      start(nodeId, args);
    }
    await waitUntilReady(controllerEndpoint);
    for (const nodeId of nodes) await waitUntilReady(`unix://${layout.nodeSocket(nodeId)}`);

    const lines = [
      'durable-csi dev stack is up',
      `  Temporal:    ${server.address} (namespace ${server.namespace})`,
      `  Web UI:      ${server.uiUrl ?? 'disabled'}`,
      `  controller:  ${controllerEndpoint}`,
      ...nodes.map(
        (nodeId) => `  ${nodeId.padEnd(12)} unix://${layout.nodeSocket(nodeId)}  pool ${layout.pool(nodeId)}`,
      ),
      `  metrics:     http://${metricsAt(0)}/metrics (controller), ports ${options.metricsPort + 1}+ for the nodes`,
      `  logs:        ${layout.logs}`,
      'Try: npx durable-csi volumes create demo --size 1Gi    (Ctrl-C stops everything; data stays in the data dir)',
    ];
    process.stdout.write(lines.join('\n') + '\n');
  } catch (error) {
    await stopAll();
    throw error;
  }
  await new Promise<void>((resolve) => {
    const stop = () => resolve();
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
  });
  process.stdout.write('stopping the dev stack...\n');
  await stopAll();
}
