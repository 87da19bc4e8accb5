import { Client } from '@temporalio/client';
import { Worker, type NativeConnection } from '@temporalio/worker';
import { readNodeRecord } from '../node-records/reads';
import { createNodeActivities } from '../activities/node-activities';
import { createPresenceActivities } from '../activities/presence-activities';
import type { Logger } from '../common/logger';
import { nodeTaskQueue } from '../common/names';
import type { TemporalConfig } from '../temporal/config';
import { connectTemporal } from '../temporal/connection';
import { driverVersion } from '../common/version';
import { poolNamedByOperations } from '../operations/pending-operations';
import type { AgentPool } from './agent-pool';
import { decidePool } from './pool-gate';
import { startPresence, type Presence } from './presence';
import { retrying, Stopped } from './retrying';
import { nodeWorkerTuning } from './worker-options';

/** How often a refused pool is looked at again (a disk mounted meanwhile is then opened). */
const POOL_RECHECK_MS = 10_000;

export interface NodeTemporalOptions {
  driverName: string;
  nodeId: string;
  /** The pool directory, for messages. */
  poolDir: string;
  temporal: TemporalConfig;
  /** `--accept-new-pool`: the pool identity the operator declared gone (agent/pool-gate.ts). */
  acceptNewPool?: string;
}

export interface NodeTemporal {
  /** Undefined once the worker runs and the node's record was started; else what the agent is waiting for. */
  notReady(): string | undefined;
  /** Resolves when the agent starts stopping (presence activities return "leaving"). */
  stop(): Promise<void>;
}

/**
 * Everything of the node agent that needs Temporal, started in the background so that kubelet is served
 * whatever Temporal's state: connect, settle the pool against the node's record, run the worker of the node's
 * task queue, keep the record running. Each step is retried with a bounded backoff and logged; readiness (CSI
 * Probe, /readyz) says which step it waits for.
 */
export function startNodeTemporal(options: NodeTemporalOptions, pool: AgentPool, logger: Logger): NodeTemporal {
  const abort = new AbortController();
  const { signal } = abort;
  let waitingFor = `connecting to Temporal at ${options.temporal.address}`;
  let connection: NativeConnection | undefined;
  let presence: Presence | undefined;
  let worker: Worker | undefined;
  let workerDone: Promise<void> | undefined;
  const note = (step: string) => (message: string) => (waitingFor = `${step}: ${message}`);

  const connect = () =>
    retrying('Temporal', () => connectTemporal(options.temporal, (message) => logger.error(message)), {
      logger,
      signal,
      onFailure: note(`connecting to Temporal at ${options.temporal.address}`),
    });

  /** The pool the worker serves, once the gate lets it open (agent/pool-gate.ts). */
  const settlePool = (client: Client) =>
    retrying(
      'pool',
      async () => {
        const record = await readNodeRecord(client, options.driverName, options.nodeId);
        const onDisk = await pool.backend.identity();
        const remembered = record?.node?.poolId;
        const gate = decidePool({
          nodeId: options.nodeId,
          pool: options.poolDir,
          onDisk,
          remembered,
          named:
            remembered === undefined && !onDisk
              ? await poolNamedByOperations(client, options.driverName, options.nodeId)
              : undefined,
          accepted: options.acceptNewPool,
          recheckSeconds: POOL_RECHECK_MS / 1000,
        });
        if (gate.kind === 'refuse') {
          pool.wait(gate.message);
          throw new Error(gate.message);
        }
        if (gate.note) logger.warn({ decision: gate.note }, `pool identity decision: ${gate.note}`);
        return pool.open(gate.fresh);
      },
      { logger, signal, onFailure: note('settling the pool'), delayMs: () => POOL_RECHECK_MS },
    );

  const startWorker = (poolId: string, running: Presence) =>
    retrying(
      'worker',
      () =>
        Worker.create({
          connection,
          namespace: options.temporal.namespace,
          taskQueue: nodeTaskQueue(options.driverName, options.nodeId),
          activities: {
            ...createNodeActivities({ backend: pool.backend, poolId, nodeId: options.nodeId }),
            ...createPresenceActivities({
              nodeId: options.nodeId,
              backend: pool.backend,
              agentVersion: driverVersion(),
              leaving: running.leaving,
              onRecordLost: () => running.recordLost(),
            }),
          },
          shutdownGraceTime: '5s',
          ...nodeWorkerTuning(),
        }),
      { logger, signal, onFailure: note('starting the worker') },
    );

  const run = async () => {
    connection = await connect();
    logger.info({ temporal: options.temporal.address }, 'connected to Temporal');
    const client = new Client({ connection, namespace: options.temporal.namespace });
    waitingFor = 'settling the pool against the node record';
    const report = await settlePool(client);
    waitingFor = 'starting the worker';
    presence = startPresence({ client, driverName: options.driverName, nodeId: options.nodeId, logger });
    worker = await startWorker(report.poolId, presence);
    workerDone = worker.run();
    workerDone.catch((error: unknown) => {
      logger.fatal({ err: error }, 'activity worker stopped');
      process.exit(1);
    });
    logger.info({ poolId: report.poolId }, 'node worker running');
  };
  run().catch((error: unknown) => {
    if (!(error instanceof Stopped)) {
      logger.fatal({ err: error }, 'node agent could not start its Temporal side');
      process.exit(1);
    }
  });

  return {
    notReady: () => {
      if (worker?.getState() === 'RUNNING' && presence?.registered()) return undefined;
      return worker ? 'starting the node record' : waitingFor;
    },
    stop: async () => {
      abort.abort();
      // First: the held presence activity returns "leaving", so the record turns offline now, not in 30 s.
      presence?.stop();
      if (worker && worker.getState() === 'RUNNING') worker.shutdown();
      await workerDone?.catch(() => undefined);
      await connection?.close();
    },
  };
}
