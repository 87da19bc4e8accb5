import { Client, Connection } from '@temporalio/client';
import { DefaultLogger, NativeConnection, Runtime, Worker } from '@temporalio/worker';
import path from 'node:path';
import readline from 'node:readline';
import { createNodeActivities } from '../../../activities/node-activities';
import { createPresenceActivities } from '../../../activities/presence-activities';
import { startPresence } from '../../../agent/presence';
import { nodeWorkerTuning } from '../../../agent/worker-options';
import { createLogger } from '../../../common/logger';
import { DEFAULT_PRESENCE_TIMEOUT_MS, nodeTaskQueue } from '../../../common/names';
import { DirBackend } from '../../../storage/dir/dir-backend';

/**
 * Many virtual node agents in one process, for the scale benchmark: each has a real dir pool, polls its own task
 * queue with the node and presence activities, and keeps its node record as the real agent (agent/node-agent.ts)
 * does. Only the CSI Node service is missing (the benchmark drives the controller).
 *
 *   node virtual-nodes.js <temporal-address> <driver-name> <root> <first-index> <count>
 * Prints "ready <count>" once every worker runs; takes "restart <index>..." on stdin (the churn of scale-churn.ts);
 * stops on SIGTERM.
 */
/** As a real agent's --presence-timeout; `DURABLE_CSI_BENCH_PRESENCE_TIMEOUT_MS` measures another (docs/scale.md). */
const PRESENCE_TIMEOUT_MS = Number(process.env.DURABLE_CSI_BENCH_PRESENCE_TIMEOUT_MS || DEFAULT_PRESENCE_TIMEOUT_MS);

async function main(): Promise<void> {
  const [address, driverName, root, first, count] = process.argv.slice(2);
  if (!address || !driverName || !root || !first || !count)
    throw new Error('usage: <address> <driver> <root> <first> <count>');
  Runtime.install({ logger: new DefaultLogger('WARN'), shutdownSignals: [] });
  const logger = createLogger('virtual-nodes');
  const connection = await Connection.connect({ address });
  const client = new Client({ connection });
  const native = await NativeConnection.connect({ address });
  /** Starts one node's agent (pool, record, worker) and returns how to stop it, as agent/node-agent.ts does. */
  const startNode = async (index: number): Promise<() => Promise<void>> => {
    const nodeId = `vnode-${index}`;
    const backend = new DirBackend({ pool: path.join(root, nodeId), capacityBytes: 1024 ** 4, quota: 'none' });
    const opened = await backend.open();
    const presence = startPresence({ client, driverName, nodeId, logger });
    const worker = await Worker.create({
      connection: native,
      taskQueue: nodeTaskQueue(driverName, nodeId),
      activities: {
        ...createNodeActivities({ backend, poolId: opened.poolId, nodeId }),
        ...createPresenceActivities({
          nodeId,
          backend,
          agentVersion: 'virtual',
          presenceTimeoutMs: PRESENCE_TIMEOUT_MS,
          leaving: presence.leaving,
          onRecordLost: () => presence.recordLost(),
        }),
      },
      ...nodeWorkerTuning(), // as agent/node-agent.ts
      // As a real agent's `pid@$POD_NAME` (agent/node-temporal.ts), each virtual agent as its own Pod: the churn's
      // crash plays the controller's Pod watch, which fails only the hold of the Pod reported gone.
      identity: `${process.pid}@${nodeId}`,
      shutdownGraceTime: '2s',
    });
    const running = worker.run();
    return async () => {
      presence.stop();
      await new Promise((resolve) => setTimeout(resolve, 200));
      worker.shutdown();
      await running;
      await backend.close();
    };
  };
  const stops = new Map<number, () => Promise<void>>();
  for (let index = Number(first); index < Number(first) + Number(count); index++)
    stops.set(index, await startNode(index));
  process.stdout.write(`ready ${count}\n`);

  // "restart <index>...": each named agent stops as on SIGTERM (its record told it is leaving, its worker drained)
  // and starts again, as a rolling upgrade restarts an agent; answered "restarted <indexes>" once all run again.
  readline.createInterface({ input: process.stdin }).on('line', (line) => {
    const [command, ...indexes] = line.trim().split(/\s+/);
    if (command !== 'restart') return void process.stderr.write(`unknown command: ${line}\n`);
    void Promise.all(
      indexes.map(async (text) => {
        const index = Number(text);
        const stop = stops.get(index);
        if (!stop) throw new Error(`vnode-${index} is not on this host`);
        await stop();
        stops.set(index, await startNode(index));
      }),
    ).then(
      () => process.stdout.write(`restarted ${indexes.join(' ')}\n`),
      (error: unknown) => process.stderr.write(`restart ${indexes.join(' ')} failed: ${String(error)}\n`),
    );
  });
  process.once('SIGTERM', () => {
    void Promise.all([...stops.values()].map((stop) => stop())).finally(() => process.exit(0));
  });
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
