import type { KubeConfig, V1Node } from '@kubernetes/client-node';
import { makeInformer } from '@kubernetes/client-node';
import type { Client } from '@temporalio/client';
import { listNodeRecords, readNodeRecord } from '../activities/node-record-reads';
import { DriverError, FailureType } from '../common/failures';
import type { Logger } from '../common/logger';
import { formatDuration } from '../operations/describe-wait';
import { forgetNode } from '../operations/forget-node';
import { listPendingOperations } from '../operations/pending-operations';
import { listDriverPvs } from './driver-pvs';
import { coreApi } from './kube-config';
import type { NodeDeletedPolicy } from './node-deleted-policy';
import { formatNodeDeletedPolicy } from './node-deleted-policy';
import { recordPvEvents, type PvEvent } from './pv-events';

export interface NodeDeletedWatchOptions {
  kubeConfig: KubeConfig;
  client: Client;
  driverName: string;
  policy: NodeDeletedPolicy;
  logger: Logger;
  /** How long to wait before trying again a forget that could not run (agent still live, Temporal down). */
  retryMs?: number;
}

/** A deleted Node that holds our volumes or operations, until it returns or is forgotten. */
interface GoneNode {
  deletedAt: Date;
  /** The Node's UID (or "absent" when found missing at start): names the decision in Event names. */
  key: string;
  timer?: NodeJS.Timeout;
}

const COMPONENT = 'durable-csi-controller';

/**
 * The Node-deleted policy (docs/kubernetes.md). Watches Node objects; when one that holds volumes or pending
 * operations of this driver is deleted, it reports so on the affected PVs and, under forget-after, forgets the
 * node (the `durable-csi nodes forget` path) once the Node has stayed away that long. A Node that comes back
 * in the meantime cancels it. What a replica holds in memory is only the clock: a restarted controller finds
 * the Node missing at start and starts the clock again, so it forgets later, never earlier. Every replica acts;
 * forgetting twice is harmless and the Events are deduplicated by name.
 */
export async function startNodeDeletedWatch(options: NodeDeletedWatchOptions): Promise<{ stop(): Promise<void> }> {
  const { client, driverName, policy, logger } = options;
  const retryMs = options.retryMs ?? 10_000;
  const core = coreApi(options.kubeConfig);
  const informer = makeInformer<V1Node>(options.kubeConfig, '/api/v1/nodes', () => core.listNode());
  const gone = new Map<string, GoneNode>();
  let stopped = false;

  const affected = async (nodeId: string) => {
    const [pvs, record, pending] = await Promise.all([
      listDriverPvs(core, driverName),
      readNodeRecord(client, driverName, nodeId),
      listPendingOperations(client, driverName, { nodeId }),
    ]);
    const onNode = pvs.filter((pv) => pv.nodeId === nodeId);
    // Forgotten already (by an operator, or another replica): nothing is left to decide.
    if (record?.forgotten) return { pvs: onNode, holdsSomething: false };
    const volumeCount = record?.node?.volumeCount ?? 0;
    return { pvs: onNode, holdsSomething: onNode.length > 0 || volumeCount > 0 || pending.length > 0 };
  };

  const report = async (nodeId: string, event: PvEvent) => {
    const { pvs } = await affected(nodeId);
    await recordPvEvents(core, COMPONENT, pvs, event, logger);
  };

  const tryForget = async (nodeId: string) => {
    const entry = gone.get(nodeId);
    if (!entry || stopped) return;
    const reason = `Kubernetes Node ${nodeId} deleted at ${entry.deletedAt.toISOString()}`;
    try {
      const outcome = await forgetNode(client, driverName, nodeId, reason);
      gone.delete(nodeId);
      logger.warn({ node: nodeId, released: outcome.released.length, reason }, 'node forgotten (--node-deleted)');
      const released = `${outcome.released.length} pending operation(s) released`;
      await report(nodeId, {
        type: 'Warning',
        reason: 'NodeForgotten',
        message: `durable-csi forgot node ${nodeId} (${outcome.notice.reason}); ${released}. This volume was on that node: its data is gone with it.`,
        key: `${entry.key}/forgotten`,
      });
    } catch (error) {
      if (error instanceof DriverError && error.type === FailureType.NotFound) {
        gone.delete(nodeId);
        logger.info({ node: nodeId }, 'deleted Node is not registered with durable-csi; nothing to forget');
        return;
      }
      // Its agent still heartbeats (FailedPrecondition), or Temporal did not answer: try again later.
      logger.warn(
        { err: error, node: nodeId },
        `cannot forget the node yet; trying again in ${formatDuration(retryMs)}`,
      );
      entry.timer = setTimeout(() => void tryForget(nodeId), retryMs);
    }
  };

  const onGone = async (nodeId: string, key: string, deletedAt: Date) => {
    if (gone.has(nodeId)) return;
    const { pvs, holdsSomething } = await affected(nodeId);
    if (!holdsSomething) {
      logger.info({ node: nodeId }, 'Kubernetes Node deleted; it holds no durable-csi volumes or operations');
      return;
    }
    const entry: GoneNode = { deletedAt, key };
    gone.set(nodeId, entry);
    const at = deletedAt.toISOString();
    const then =
      policy.kind === 'wait'
        ? `durable-csi waits for its node agent to return (--node-deleted=wait); if the node is gone for good, run \`durable-csi nodes forget ${nodeId} --reason ...\``
        : `durable-csi forgets the node at ${new Date(deletedAt.getTime() + policy.afterMs).toISOString()} unless the Node returns first (--node-deleted=${formatNodeDeletedPolicy(policy)}); this volume's data is then lost`;
    logger.warn({ node: nodeId, policy: formatNodeDeletedPolicy(policy) }, 'Kubernetes Node holding volumes deleted');
    if (policy.kind === 'forget-after') {
      const delay = Math.max(0, deletedAt.getTime() + policy.afterMs - Date.now());
      entry.timer = setTimeout(() => void tryForget(nodeId), delay);
    }
    // Events are reports: recordPvEvents logs its failures and never throws, so the decision above stands.
    await recordPvEvents(
      core,
      COMPONENT,
      pvs,
      {
        type: 'Warning',
        reason: 'NodeDeleted',
        message: `Kubernetes Node ${nodeId}, which holds this volume, was deleted at ${at}; ${then}.`,
        key: `${key}/deleted`,
      },
      logger,
    );
  };

  const onBack = async (nodeId: string) => {
    const entry = gone.get(nodeId);
    if (!entry) return;
    clearTimeout(entry.timer);
    gone.delete(nodeId);
    logger.info({ node: nodeId }, 'Kubernetes Node is back; the Node-deleted policy stands down');
    await report(nodeId, {
      type: 'Normal',
      reason: 'NodeReturned',
      message:
        policy.kind === 'wait'
          ? `Kubernetes Node ${nodeId} is back.`
          : `Kubernetes Node ${nodeId} is back; forgetting the node is cancelled.`,
      key: `${entry.key}/returned`,
    });
  };

  /** Registered nodes without a Node object (deleted while no controller watched) start their clock now. */
  const reconcileAbsent = async () => {
    const present = new Set(informer.list().map((node) => node.metadata?.name));
    for (const record of await listNodeRecords(client, driverName)) {
      if (record.forgotten || present.has(record.nodeId) || gone.has(record.nodeId)) continue;
      await onGone(record.nodeId, 'absent', new Date());
    }
  };

  const guard = (what: string, work: () => Promise<void>) =>
    work().catch((error: unknown) => logger.warn({ err: error }, `Node-deleted policy: ${what} failed`));

  // A deletion that could not be handled (Temporal or the API server did not answer) is tried again: the watch
  // will not report it twice.
  const handleDeletion = (name: string, uid: string, at: Date) => {
    onGone(name, uid, at).catch((error: unknown) => {
      logger.warn({ err: error, node: name }, 'Node-deleted policy: handling a Node deletion failed; retrying');
      setTimeout(() => !stopped && !informer.get(name) && handleDeletion(name, uid, at), retryMs);
    });
  };
  informer.on('delete', (node) => {
    const name = node.metadata?.name;
    if (name) handleDeletion(name, node.metadata?.uid ?? 'unknown', new Date());
  });
  informer.on('add', (node) => {
    const name = node.metadata?.name;
    if (name) void guard('handling a returning Node', () => onBack(name));
  });
  const restart = () => {
    if (stopped) return;
    informer
      .start()
      .then(() => guard('finding deleted Nodes', reconcileAbsent))
      .catch((error: unknown) => {
        logger.warn({ err: error }, 'Node watch could not start; retrying');
        setTimeout(restart, retryMs);
      });
  };
  // client-node's informer stops on a watch error; start it again (it re-lists, then reconcile finds gaps).
  informer.on('error', (error) => {
    logger.warn({ err: error }, 'Node watch failed; restarting it');
    setTimeout(restart, retryMs);
  });
  await informer.start();
  await guard('finding deleted Nodes', reconcileAbsent);
  logger.info({ policy: formatNodeDeletedPolicy(policy) }, 'watching Kubernetes Nodes');
  return {
    async stop() {
      stopped = true;
      for (const entry of gone.values()) clearTimeout(entry.timer);
      await informer.stop();
    },
  };
}
