import os from 'node:os';
import { Client } from '@temporalio/client';
import { Worker } from '@temporalio/worker';
import { readNodeRecord } from '../node-records/reads';
import { createNodeActivities } from '../activities/node-activities';
import { createPresenceActivities } from '../activities/presence-activities';
import type { Logger } from '../common/logger';
import { nodeTaskQueue } from '../common/names';
import { PoolLayout } from '../storage/pool/pool-layout';
import { TransferSource, movesAsArchive, transferPublicKey } from '../storage/pool/transfer';
import type { NodeTransfer } from '../activities/node-activities';
import { pullFailpoint, withTransferFailpoints, type Failpoint } from './failpoints';
import type { TemporalConfig } from '../temporal/config';
import { FollowingConnection } from '../temporal/connection';
import { driverVersion } from '../common/version';
import { poolNamedByOperations } from '../operations/pending-operations';
import type { AgentPool } from './agent-pool';
import { decidePool, filesystemRefusal, POOL_RECHECK_MS } from './pool-gate';
import { startPresence, type Presence } from './presence';
import { retrying, Stopped } from './retrying';
import { nodeWorkerTuning } from './worker-options';

export interface NodeTemporalOptions {
  driverName: string;
  nodeId: string;
  /** The pool directory, for messages. */
  poolDir: string;
  temporal: TemporalConfig;
  /** `--accept-new-pool`: the pool identity the operator declared gone (agent/pool-gate.ts). */
  acceptNewPool?: string;
  /** `--presence-timeout`, reported to the node's record. */
  presenceTimeoutMs: number;
  /**
   * `--transfer-port` and `--transfer-address`: where this agent serves moves' copies (docs/volume-moves.md). It
   * listens on the address it advertises, so a copy is served on no other interface. Absent: no moves.
   */
  transfer?: { host: string; port: number };
  /** `--failpoints` (test harnesses only): the move's failpoints in the pull, the offer and its withdrawal. */
  failpoints?: Set<Failpoint>;
}

export interface NodeTemporal {
  /** Undefined once the worker runs and the node's record was started; else what the agent is waiting for. */
  notReady(): string | undefined;
  /** The end of the client certificate the live connection presents; undefined before it or without one. */
  clientCertificateNotAfter(): Date | undefined;
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
  const run: NodeTemporalRun = {
    options,
    pool,
    logger,
    signal: abort.signal,
    waitingFor: `connecting to Temporal at ${options.temporal.address}`,
  };
  startInBackground(run).catch((error: unknown) => {
    if (!(error instanceof Stopped)) {
      logger.fatal({ err: error }, 'node agent could not start its Temporal side');
      process.exit(1);
    }
  });
  return {
    notReady: () => {
      if (run.worker?.getState() === 'RUNNING' && run.presence?.registered()) return undefined;
      return run.worker ? 'starting the node record' : run.waitingFor;
    },
    clientCertificateNotAfter: () => run.connection?.clientCertificateNotAfter,
    stop: async () => {
      abort.abort();
      // First: the held presence activity returns "leaving", so the record turns offline now, not in 30 s.
      run.presence?.stop();
      if (run.worker && run.worker.getState() === 'RUNNING') run.worker.shutdown();
      await run.workerDone?.catch(() => undefined);
      await run.transfer?.source.close();
      await run.connection?.close();
    },
  };
}

/** What the background start has reached, for readiness and for stopping. */
interface NodeTemporalRun {
  readonly options: NodeTemporalOptions;
  readonly pool: AgentPool;
  readonly logger: Logger;
  readonly signal: AbortSignal;
  waitingFor: string;
  connection?: FollowingConnection;
  presence?: Presence;
  worker?: Worker;
  workerDone?: Promise<void>;
  transfer?: NodeTransfer;
}

/**
 * The steps in order: wait for a pool filesystem the backend may run on, connect, settle the pool, start the
 * record's presence and the worker, run it.
 */
async function startInBackground(run: NodeTemporalRun): Promise<void> {
  const { options, logger } = run;
  await untilFilesystemFit(run);
  // Named before the first attempt: a connect that hangs (a firewall dropping packets) logs nothing for a while.
  logger.info({ temporal: options.temporal.address }, 'connecting to Temporal');
  run.connection = await connect(run);
  logger.info({ temporal: options.temporal.address }, 'connected to Temporal');
  const client = new Client({ connection: run.connection, namespace: options.temporal.namespace });
  run.waitingFor = 'settling the pool against the node record';
  const report = await settlePool(run, client);
  if (options.transfer) {
    run.waitingFor = 'serving node-to-node copies';
    run.transfer = await serveTransfers(run, options.transfer);
  }
  run.waitingFor = 'starting the worker';
  run.presence = startPresence({ client, driverName: options.driverName, nodeId: options.nodeId, logger });
  run.worker = await startWorker(run, report.poolId, run.presence);
  run.connection.serve(run.worker);
  run.workerDone = run.worker.run();
  run.workerDone.catch((error: unknown) => {
    logger.fatal({ err: error }, 'activity worker stopped');
    process.exit(1);
  });
  logger.info({ poolId: report.poolId }, 'node worker running');
}

/**
 * The agent's one TransferSource, once the pool is open (it serves the offers the pool keeps, so a restarted agent
 * serves its moves again), and its key (made in the pool on first use). Refusals are logged, never a token or key.
 */
function serveTransfers(run: NodeTemporalRun, address: { host: string; port: number }): Promise<NodeTransfer> {
  const { options, logger } = run;
  const layout = new PoolLayout(options.poolDir);
  return retrying(
    'transfers',
    async () => {
      const source = new TransferSource(layout, {
        packTrees: movesAsArchive(run.pool.backend.kind),
        onRefused: (refusal) => logger.warn({ ...refusal }, 'node-to-node copy refused'),
      });
      try {
        const bound = await source.listen(address.port, address.host);
        const publicKey = await transferPublicKey(layout);
        logger.info({ host: address.host, port: bound.port, offered: source.offered() }, 'serving node-to-node copies');
        const endpoint = { host: address.host, port: bound.port, publicKey };
        return {
          source: withTransferFailpoints(source, options.failpoints),
          layout,
          endpoint,
          pullFailpoint: pullFailpoint(options.failpoints),
        };
      } catch (error) {
        await source.close();
        throw error;
      }
    },
    retryOptions(run, `serving node-to-node copies on ${address.host}:${address.port}`),
  );
}

/** Retry options of a step: logged, stopped by `stop()`, and shown by readiness while it fails. */
function retryOptions(run: NodeTemporalRun, step: string) {
  return {
    logger: run.logger,
    signal: run.signal,
    onFailure: (message: string) => (run.waitingFor = `${step}: ${message}`),
  };
}

/** A connection that follows the TLS files: a renewed certificate is used without a restart (temporal/connection.ts). */
function connect(run: NodeTemporalRun): Promise<FollowingConnection> {
  const { temporal } = run.options;
  return retrying(
    'Temporal',
    () =>
      FollowingConnection.connect(temporal, {
        info: (message) => run.logger.info(message),
        error: (message) => run.logger.error(message),
      }),
    retryOptions(run, `connecting to Temporal at ${temporal.address}`),
  );
}

/**
 * The gate's first part, which needs no Temporal (agent/pool-gate.ts): until the pool's filesystem is fit the agent
 * looks again every 10 s; then a pool with an identity is opened for kubelet at once, as at start.
 */
function untilFilesystemFit(run: NodeTemporalRun): Promise<void> {
  return retrying(
    'pool',
    async () => {
      const unfit = await run.pool.openIfIdentified(run.options.nodeId);
      if (unfit !== undefined) throw new Error(unfit);
    },
    { ...retryOptions(run, 'settling the pool'), delayMs: () => POOL_RECHECK_MS },
  );
}

/** The pool the worker serves, once the gate lets it open (agent/pool-gate.ts); a refusal is looked at again. */
function settlePool(run: NodeTemporalRun, client: Client) {
  return retrying('pool', () => openPoolThroughGate(run, client), {
    ...retryOptions(run, 'settling the pool'),
    delayMs: () => POOL_RECHECK_MS,
  });
}

async function openPoolThroughGate(run: NodeTemporalRun, client: Client) {
  const { options, pool, logger } = run;
  const record = await readNodeRecord(client, options.driverName, options.nodeId);
  const onDisk = await pool.backend.identity();
  const remembered = record?.node?.poolId;
  const gate = decidePool({
    unfit: await filesystemRefusal(pool.backend, POOL_RECHECK_MS / 1000),
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
    pool.refuse(gate.message);
    throw new Error(gate.message);
  }
  if (gate.note) logger.warn({ decision: gate.note }, `pool identity decision: ${gate.note}`);
  return pool.open(gate.fresh);
}

/**
 * The SDK's own form (pid@host) with the Pod's name as host when deploy/ gives it (POD_NAME): the controller's watch
 * of the agents' Pods fails only a hold whose worker runs in the Pod Kubernetes reports gone
 * (kubernetes/agent-readiness.ts). In a Pod without host networking the hostname is that name anyway.
 */
function workerIdentity(): string {
  return `${process.pid}@${process.env.POD_NAME || os.hostname()}`;
}

/** The worker of the node's task queue: the storage activities and the presence the record holds. */
function startWorker(run: NodeTemporalRun, poolId: string, running: Presence): Promise<Worker> {
  const { options, pool } = run;
  return retrying(
    'worker',
    () =>
      Worker.create({
        connection: run.connection?.native,
        namespace: options.temporal.namespace,
        taskQueue: nodeTaskQueue(options.driverName, options.nodeId),
        activities: {
          ...createNodeActivities({ backend: pool.backend, poolId, nodeId: options.nodeId, transfer: run.transfer }),
          ...createPresenceActivities({
            nodeId: options.nodeId,
            backend: pool.backend,
            agentVersion: driverVersion(),
            presenceTimeoutMs: options.presenceTimeoutMs,
            transfer: run.transfer?.endpoint,
            leaving: running.leaving,
            onRecordLost: () => running.recordLost(),
          }),
        },
        shutdownGraceTime: '5s',
        identity: workerIdentity(),
        ...nodeWorkerTuning(),
      }),
    retryOptions(run, 'starting the worker'),
  );
}
