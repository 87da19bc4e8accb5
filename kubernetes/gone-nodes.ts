import type { CoreV1Api, CustomObjectsApi } from '@kubernetes/client-node';
import type { Client } from '@temporalio/client';
import { listNodeRecords, readNodeRecord } from '../node-records/reads';
import type { Logger } from '../common/logger';
import { formatDuration } from '../common/duration';
import { forgetNode } from '../operations/forget-node';
import { listPendingOperations } from '../operations/pending-operations';
import { listDriverPvs } from './driver-pvs';
import { statusOf } from './api-status';
import type { NodeDeletedPolicy } from './node-deleted-policy';
import { formatNodeDeletedPolicy } from './node-deleted-policy';
import { recordPvEvents, type PvEvent } from './pv-events';
import { listDriverSnapshotContents } from './snapshot-contents';

export interface GoneNodesOptions {
  client: Client;
  core: CoreV1Api;
  /** VolumeSnapshotContents: the Kubernetes evidence of snapshot copies, as PVs are of volumes. */
  custom: CustomObjectsApi;
  driverName: string;
  policy: NodeDeletedPolicy;
  logger: Logger;
  retryMs: number;
  /** Whether the Node object is in the watch's cache now (never a snapshot taken before an await). */
  inCache(nodeId: string): boolean;
}

/** A deleted Node that holds our volumes, snapshots or operations, until it returns or is forgotten. */
interface GoneNode {
  deletedAt: Date;
  /** The Node's UID (or "absent" when found missing at start): names the decision in Event names. */
  key: string;
  timer?: NodeJS.Timeout;
}

const COMPONENT = 'durable-csi-controller';
/** How long a decision waits for a node's record to take in the end of its last hold (settledRecord). */
const SETTLE_MS = 10_000;

/**
 * The Node-deleted policy's decisions, one Node at a time (docs/kubernetes.md). Every await is a moment in which
 * the Node can come back, so presence is read again after each one that precedes a decision: a forget is made
 * only for a Node that neither the watch's cache nor the API server holds at that moment.
 */
export class GoneNodes {
  private readonly gone = new Map<string, GoneNode>();
  /** Nodes whose deletion is being looked at: a second notice of the same deletion waits for the first. */
  private readonly deciding = new Set<string>();
  private stopped = false;

  constructor(private readonly options: GoneNodesOptions) {}

  /** A Node was deleted (or found missing at start): report it and, under forget-after, start its clock. */
  async deleted(nodeId: string, key: string, deletedAt: Date): Promise<void> {
    if (this.gone.has(nodeId) || this.deciding.has(nodeId)) return;
    this.deciding.add(nodeId);
    try {
      const { pvs, holdsSomething } = await this.affected(nodeId);
      if (this.options.inCache(nodeId)) {
        this.options.logger.info({ node: nodeId }, 'Kubernetes Node deleted and back already; nothing to decide');
        return;
      }
      if (!holdsSomething) {
        this.options.logger.info(
          { node: nodeId },
          'Kubernetes Node deleted; it holds no durable-csi volumes, snapshots or operations',
        );
        return;
      }
      const entry: GoneNode = { deletedAt, key };
      this.gone.set(nodeId, entry);
      this.startClock(nodeId, entry);
      // Events are reports: recordPvEvents logs its failures and never throws, so the decision above stands.
      await recordPvEvents(this.options.core, COMPONENT, pvs, this.deletedEvent(nodeId, entry), this.options.logger);
    } finally {
      this.deciding.delete(nodeId);
    }
  }

  /** A Node is back: a pending forget is cancelled. */
  async returned(nodeId: string): Promise<void> {
    const entry = this.gone.get(nodeId);
    if (!entry) return;
    clearTimeout(entry.timer);
    this.gone.delete(nodeId);
    this.options.logger.info({ node: nodeId }, 'Kubernetes Node is back; the Node-deleted policy stands down');
    await this.report(nodeId, {
      type: 'Normal',
      reason: 'NodeReturned',
      message:
        this.options.policy.kind === 'wait'
          ? `Kubernetes Node ${nodeId} is back.`
          : `Kubernetes Node ${nodeId} is back; forgetting the node is cancelled.`,
      key: `${entry.key}/returned`,
    });
  }

  /** Registered nodes without a Node object (deleted while no controller watched) start their clock now. */
  async reconcileAbsent(): Promise<void> {
    for (const record of await listNodeRecords(this.options.client, this.options.driverName)) {
      // Presence is read per record, now: the listing above took time, and Nodes come and go meanwhile.
      if (record.forgotten || this.gone.has(record.nodeId) || this.options.inCache(record.nodeId)) continue;
      await this.deleted(record.nodeId, 'absent', new Date());
    }
  }

  stop(): void {
    this.stopped = true;
    for (const entry of this.gone.values()) clearTimeout(entry.timer);
  }

  private startClock(nodeId: string, entry: GoneNode): void {
    const { policy, logger } = this.options;
    logger.warn({ node: nodeId, policy: formatNodeDeletedPolicy(policy) }, 'Kubernetes Node holding volumes deleted');
    if (policy.kind !== 'forget-after') return;
    const delay = Math.max(0, entry.deletedAt.getTime() + policy.afterMs - Date.now());
    entry.timer = setTimeout(() => void this.forget(nodeId, entry), delay);
  }

  /** Forgets the node, unless it is back or the forget cannot run yet (then it tries again later). */
  private async forget(nodeId: string, entry: GoneNode): Promise<void> {
    const { client, driverName, logger, retryMs } = this.options;
    if (this.stopped || this.gone.get(nodeId) !== entry) return;
    const reason = `Kubernetes Node ${nodeId} deleted at ${entry.deletedAt.toISOString()}`;
    try {
      // The watch may have missed the Node's return (while deciding, or in a watch gap): ask the API server too.
      if (await this.nodeExists(nodeId)) return await this.returned(nodeId);
      if (this.gone.get(nodeId) !== entry) return; // it came back while the API server answered
      // The policy has evidence the node held something (its PVs, its record): record the decision even when
      // the record itself is lost, so later deletions of its volumes end with it.
      const outcome = await forgetNode(client, driverName, nodeId, reason, { allowUnregistered: true });
      this.gone.delete(nodeId);
      logger.warn({ node: nodeId, released: outcome.released.length, reason }, 'node forgotten (--node-deleted)');
      const released = `${outcome.released.length} pending operation(s) released`;
      await this.report(nodeId, {
        type: 'Warning',
        reason: 'NodeForgotten',
        message: `durable-csi forgot node ${nodeId} (${outcome.notice.reason}); ${released}. This volume was on that node: its data is gone with it.`,
        key: `${entry.key}/forgotten`,
      });
    } catch (error) {
      // Its agent still heartbeats (FailedPrecondition), or Temporal or the API server did not answer.
      logger.warn(
        { err: error, node: nodeId },
        `cannot forget the node yet; trying again in ${formatDuration(retryMs)}`,
      );
      if (this.gone.get(nodeId) === entry) entry.timer = setTimeout(() => void this.forget(nodeId, entry), retryMs);
    }
  }

  private async nodeExists(nodeId: string): Promise<boolean> {
    if (this.options.inCache(nodeId)) return true;
    try {
      await this.options.core.readNode({ name: nodeId });
      return true;
    } catch (error) {
      if (statusOf(error) === 404) return false;
      throw error;
    }
  }

  /**
   * What the node holds, by every witness: its PVs and VolumeSnapshotContents (Kubernetes), its record's counts of
   * volumes and snapshot copies, and its pending operations (Temporal). A node holding only snapshots is decided
   * too: else the DeleteSnapshots of its copies wait for ever.
   */
  private async affected(nodeId: string) {
    const { client, core, custom, driverName } = this.options;
    const [pvs, contents, record, pending] = await Promise.all([
      listDriverPvs(core, driverName),
      listDriverSnapshotContents(custom, driverName),
      settledRecord(client, driverName, nodeId),
      listPendingOperations(client, driverName, { nodeId }),
    ]);
    const onNode = pvs.filter((pv) => pv.nodeId === nodeId);
    // Forgotten already (by an operator, or another replica): nothing is left to decide.
    if (record?.forgotten) return { pvs: onNode, holdsSomething: false };
    const snapshots = contents === 'not-installed' ? [] : contents.filter((content) => content.nodeId === nodeId);
    const counted = (record?.node?.volumeCount ?? 0) + (record?.node?.snapshotCount ?? 0);
    // A record still settling has counts of unknown age: absence is never proof, so it counts as holding something.
    const holdsSomething =
      onNode.length > 0 || snapshots.length > 0 || counted > 0 || pending.length > 0 || record?.settling === true;
    return { pvs: onNode, holdsSomething };
  }

  private async report(nodeId: string, event: PvEvent): Promise<void> {
    const { pvs } = await this.affected(nodeId);
    await recordPvEvents(this.options.core, COMPONENT, pvs, event, this.options.logger);
  }

  private deletedEvent(nodeId: string, entry: GoneNode): PvEvent {
    const { policy } = this.options;
    const then =
      policy.kind === 'wait'
        ? `durable-csi waits for its node agent to return (--node-deleted=wait); if the node is gone for good, run \`durable-csi nodes forget ${nodeId} --reason ...\``
        : `durable-csi forgets the node at ${new Date(entry.deletedAt.getTime() + policy.afterMs).toISOString()} unless the Node returns first (--node-deleted=${formatNodeDeletedPolicy(policy)}); this volume's data is then lost`;
    return {
      type: 'Warning',
      reason: 'NodeDeleted',
      message: `Kubernetes Node ${nodeId}, which holds this volume, was deleted at ${entry.deletedAt.toISOString()}; ${then}.`,
      key: `${entry.key}/deleted`,
    };
  }
}

/**
 * The node's record once it has taken in the end of its last hold (readNodeRecord's `settling`): a workflow task,
 * normally milliseconds, seconds on a loaded controller. Still settling after SETTLE_MS, it is returned as it is.
 */
async function settledRecord(client: Client, driverName: string, nodeId: string) {
  const until = Date.now() + SETTLE_MS;
  for (;;) {
    const record = await readNodeRecord(client, driverName, nodeId);
    if (!record?.settling || Date.now() > until) return record;
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}
