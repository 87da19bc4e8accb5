import { Client, Connection } from '@temporalio/client';
import { DefaultLogger, NativeConnection, Runtime, Worker } from '@temporalio/worker';
import path from 'node:path';
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
 * Prints "ready <count>" once every worker runs; stops on SIGTERM.
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
  const stops: Array<() => Promise<void>> = [];
  for (let index = Number(first); index < Number(first) + Number(count); index++) {
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
      shutdownGraceTime: '2s',
    });
    const running = worker.run();
    stops.push(async () => {
      presence.stop();
      await new Promise((resolve) => setTimeout(resolve, 200));
      worker.shutdown();
      await running;
      await backend.close();
    });
  }
  process.stdout.write(`ready ${count}\n`);
  process.once('SIGTERM', () => {
    void Promise.all(stops.map((stop) => stop())).finally(() => process.exit(0));
  });
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
