import type { KubeConfig, V1Node } from '@kubernetes/client-node';
import { makeInformer } from '@kubernetes/client-node';
import type { Informer, ObjectCache } from '@kubernetes/client-node';
import type { Client } from '@temporalio/client';
import type { Logger } from '../common/logger';
import { formatDuration } from '../common/duration';
import { GoneNodes } from './gone-nodes';
import { coreApi, customObjectsApi } from './kube-config';
import type { NodeDeletedPolicy } from './node-deleted-policy';
import { formatNodeDeletedPolicy } from './node-deleted-policy';

export interface NodeDeletedWatchOptions {
  kubeConfig: KubeConfig;
  client: Client;
  driverName: string;
  policy: NodeDeletedPolicy;
  logger: Logger;
  /** How long to wait before trying again a forget that could not run (agent still live, Temporal down). */
  retryMs?: number;
  /** Told of every Node deleted, before the policy (the agents' Pod watch: controller-integration.ts). */
  onNodeDeleted?: (name: string) => void;
}

/**
 * The Node-deleted policy (docs/kubernetes.md). Watches Node objects; when one that holds volumes, snapshots or
 * pending operations of this driver is deleted, it reports so on the affected PVs and, under forget-after, forgets the
 * node (the `durable-csi nodes forget` path) once the Node has stayed away that long. A Node that comes back
 * in the meantime cancels it. What a replica holds in memory is only the clock: a restarted controller finds
 * the Node missing at start and starts the clock again, so it forgets later, never earlier. Every replica acts;
 * forgetting twice is harmless and the Events are deduplicated by name. The decisions are in gone-nodes.ts.
 */
export async function startNodeDeletedWatch(options: NodeDeletedWatchOptions): Promise<{ stop(): Promise<void> }> {
  const watch = openWatch(options);
  handleDeletions(watch);
  handleReturns(watch);
  restartOnWatchError(watch);
  await watch.informer.start();
  await findDeletedNodes(watch);
  options.logger.info({ policy: formatNodeDeletedPolicy(options.policy) }, 'watching Kubernetes Nodes');
  return {
    async stop() {
      watch.stopped = true;
      watch.nodes.stop();
      await watch.informer.stop();
    },
  };
}

/** The informer on Node objects and the policy it feeds, shared by the event handlers. */
interface NodeWatch {
  informer: Informer<V1Node> & ObjectCache<V1Node>;
  nodes: GoneNodes;
  logger: Logger;
  retryMs: number;
  stopped: boolean;
  onNodeDeleted?: (name: string) => void;
}

function openWatch(options: NodeDeletedWatchOptions): NodeWatch {
  const { client, driverName, policy, logger } = options;
  const retryMs = options.retryMs ?? 10_000;
  const core = coreApi(options.kubeConfig);
  const informer = makeInformer<V1Node>(options.kubeConfig, '/api/v1/nodes', () => core.listNode());
  const inCache = (nodeId: string) => informer.get(nodeId) !== undefined;
  const custom = customObjectsApi(options.kubeConfig);
  const nodes = new GoneNodes({ client, core, custom, driverName, policy, logger, retryMs, inCache });
  return { informer, nodes, logger, retryMs, stopped: false, onNodeDeleted: options.onNodeDeleted };
}

/**
 * A Node's deletion goes to the policy. One that could not be handled (Temporal or the API server did not answer)
 * is tried again: the watch will not report it twice.
 */
function handleDeletions(watch: NodeWatch): void {
  const { informer, nodes, logger, retryMs } = watch;
  const handleDeletion = (name: string, uid: string, at: Date) => {
    nodes.deleted(name, uid, at).catch((error: unknown) => {
      logger.warn({ err: error, node: name }, 'Node-deleted policy: handling a Node deletion failed; retrying');
      setTimeout(() => !watch.stopped && !informer.get(name) && handleDeletion(name, uid, at), retryMs);
    });
  };
  informer.on('delete', (node) => {
    const name = node.metadata?.name;
    if (name) watch.onNodeDeleted?.(name);
    if (name) handleDeletion(name, node.metadata?.uid ?? 'unknown', new Date());
  });
}

/** A Node that comes back cancels what its deletion started. */
function handleReturns(watch: NodeWatch): void {
  watch.informer.on('add', (node) => {
    const name = node.metadata?.name;
    if (name) void guarded(watch.logger, 'handling a returning Node', () => watch.nodes.returned(name));
  });
}

/** client-node's informer stops on a watch error; start it again (it re-lists, then reconcile finds gaps). */
function restartOnWatchError(watch: NodeWatch): void {
  const { informer, logger, retryMs } = watch;
  const restart = () => {
    if (watch.stopped) return;
    informer
      .start()
      .then(() => findDeletedNodes(watch))
      .catch((error: unknown) => {
        logger.warn({ err: error }, 'Node watch could not start; retrying');
        setTimeout(restart, retryMs);
      });
  };
  informer.on('error', (error) => {
    logger.warn({ err: error }, 'Node watch failed; restarting it');
    setTimeout(restart, retryMs);
  });
}

/**
 * Nodes missing from the listing that hold this driver's volumes or operations (deleted while nobody watched). A
 * look that fails (Temporal or the API server did not answer) is tried again after retryMs, until one goes through:
 * nothing else would look again before the watch restarts, and such a Node's deletions would wait meanwhile.
 */
async function findDeletedNodes(watch: NodeWatch): Promise<void> {
  try {
    await watch.nodes.reconcileAbsent();
  } catch (error) {
    watch.logger.warn(
      { err: error },
      `Node-deleted policy: finding deleted Nodes failed; trying again in ${formatDuration(watch.retryMs)}`,
    );
    setTimeout(() => void (!watch.stopped && findDeletedNodes(watch)), watch.retryMs);
  }
}

function guarded(logger: Logger, what: string, work: () => Promise<void>): Promise<void> {
  return work().catch((error: unknown) => logger.warn({ err: error }, `Node-deleted policy: ${what} failed`));
}
