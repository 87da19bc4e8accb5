import { ApplicationFailure, Context, heartbeat, log } from '@temporalio/activity';
import { copyTimeMs } from '../common/copy-budget';
import { continueInPool } from '../common/list-position';
import { formatVolumeId, ownsVolume, poolIdPrefix, type TransferEndpoint } from '../common/names';
import { DriverError, FailureType, NON_RETRYABLE_TYPES } from '../common/failures';
import type { AccessType, ContentSource, ExpandResult, SnapshotRecord, StorageBackend } from '../storage/pool/backend';
import type { PoolLayout } from '../storage/pool/pool-layout';
import { PoolBackend } from '../storage/pool/pool-backend';
import {
  discardTransfer,
  listTransfers,
  pullTransfer,
  transferStatus,
  type PoolTransfer,
  type PullProgress,
  type TransferOffer,
  type TransferSource,
} from '../storage/pool/transfer';

/**
 * Activities that touch a node's storage. They run only in that node's agent, polling the node's own task
 * queue, and each is idempotent: Temporal may deliver an attempt again after a crash.
 */
export interface NodeCreateInput {
  key: string;
  name: string;
  capacityBytes: number;
  parameters: Record<string, string>;
  /** Absent: mount. */
  accessType?: 'mount' | 'block';
  fsType?: string;
  /** Restore or clone: a snapshot or volume of this node's pool, named with the pool prefix its ID was issued on. */
  contentSource?: NodeContentSource;
  /**
   * With a content source: the most the CO accepts (0: no limit). A capacity below the source's size is raised to
   * it when this allows (CSI lets a volume be larger than required); otherwise the create is OutOfRange.
   */
  limitBytes?: number;
}

export type NodeContentSource = ({ snapshotKey: string } | { volumeKey: string }) & { poolIdPrefix: string };

export interface NodeCreateResult {
  key: string;
  poolId: string;
  /** The node that really allocated: the volume ID is built from this fact, not from the workflow's choice. */
  nodeId?: string;
  capacityBytes: number;
  /** False when the pool already held this name: a retry found the earlier allocation. */
  fresh: boolean;
}

export interface NodeDeleteInput {
  key: string;
  /** The pool identity prefix the volume ID was issued on. */
  poolIdPrefix: string;
  /**
   * A node record deleting what was written off while the node was forgotten (workflows/written-off-volumes.ts): the
   * CO was told it is gone, so until it is, no create may be handed it (by name or key). Absent otherwise.
   */
  writtenOff?: true;
}

export type NodeDeleteOutcome = 'deleted' | 'absent' | 'pool-replaced';

export interface NodeSnapshotInput {
  snapshotKey: string;
  sourceKey: string;
  /** The pool prefix of the source volume's ID: a replaced pool does not hold the source. */
  sourcePoolIdPrefix: string;
  name: string;
}

/** A snapshot as a node reports it. */
export interface NodeSnapshot {
  key: string;
  name: string;
  sourceKey: string;
  sizeBytes: number;
  /** ISO 8601. */
  createdAt: string;
  /** A member of this group snapshot (deleted with it only). */
  groupKey?: string;
  /** Moved here from another node: the ID of the volume it was taken of (sourceKey is that volume's key there). */
  sourceVolumeId?: string;
}

/** A group snapshot to make: one copy per member volume, all of one instant (docs/snapshots.md). */
export interface NodeGroupSnapshotInput {
  groupKey: string;
  name: string;
  members: { snapshotKey: string; sourceKey: string; sourcePoolIdPrefix: string }[];
}

export interface NodeGroupSnapshotResult {
  groupKey: string;
  poolId: string;
  nodeId: string;
  /** In the order of the input's members. */
  snapshots: NodeSnapshot[];
}

export interface NodeGroupDeleteInput {
  groupKey: string;
  /** The pool identity prefix the group ID was issued on. */
  poolIdPrefix: string;
  /** The members' keys, as the CO named them (DeleteVolumeGroupSnapshotRequest.snapshot_ids). */
  memberKeys: string[];
}

export interface NodeSnapshotResult extends NodeSnapshot {
  poolId: string;
  nodeId: string;
}

export interface NodeSnapshotList {
  nodeId: string;
  poolId: string;
  snapshots: NodeSnapshot[];
}

/** A lookup: only the snapshot of this key, or those of this source volume, made on the pool of this prefix. */
export interface NodeSnapshotFilter {
  poolIdPrefix: string;
  key?: string;
  sourceKey?: string;
  /** The members of this group snapshot. */
  groupKey?: string;
}

export interface NodeSnapshotListInput extends NodeListInput {
  only?: NodeSnapshotFilter;
}

export interface NodeSnapshotPage extends NodeSnapshotList {
  /** The pool holds (matching) snapshots after the last one listed. */
  more: boolean;
}

export interface NodeExpandInput extends NodeDeleteInput {
  capacityBytes: number;
}

/** A volume as getVolumeOnNode answers it (ValidateVolumeCapabilities' look at one volume). */
export interface InspectedVolume {
  key: string;
  name: string;
  capacityBytes: number;
  poolId: string;
}

/** Where a page of a node's listing starts (a list position, see common/list-position.ts) and how long it may be. */
export interface NodeListInput {
  after: string;
  maxEntries: number;
}

/** What transfers/ holds on a node's pool: staged copies (in) and offers (out), each under its move's key. */
export interface NodeTransferList {
  nodeId: string;
  poolId: string;
  transfers: PoolTransfer[];
  /** The pool holds more than were listed (MAX_NODE_TRANSFERS). */
  more: boolean;
}

/** Transfers one node lists at most: a pool holds one per move in flight, and leftovers nobody cleared. */
export const MAX_NODE_TRANSFERS = 256;

export interface NodeListPage {
  nodeId: string;
  poolId: string;
  volumes: Omit<InspectedVolume, 'poolId'>[];
  /** The pool holds volumes after the last one listed. */
  more: boolean;
}

/**
 * A page's entries stay within this many bytes of JSON whatever `maxEntries` asks (names may be 253 bytes), so the
 * batch of nodes one list workflow asks at once stays far below Temporal's 2 MB payload limit.
 */
export const NODE_LIST_PAGE_BYTES = 256 * 1024;

/* A move's steps on its two nodes (workflows/move-volume.ts, docs/volume-moves.md). */

/** Source: hold the moved volume (nothing stages it) from before the move's snapshot until the move ends. */
export interface NodeFenceInput {
  moveKey: string;
  /** The moved volume's key and the pool prefix of its ID: a replaced pool does not hold it. */
  key: string;
  poolIdPrefix: string;
  targetNodeId: string;
  /** A terminated move of the volume whose hold this one takes over. */
  replacing?: string;
}

/** Source: offer the move's snapshot (made by createSnapshotOnNode) to the target whose key the input names. */
export interface NodeOfferInput {
  moveKey: string;
  snapshotKey: string;
  /** The pool prefix of the moved volume's ID: a replaced pool holds neither it nor the snapshot. */
  poolIdPrefix: string;
  targetPublicKey: string;
}

export interface NodeOfferResult {
  /** Nothing in it is secret: its token is sealed to the target. */
  offer: TransferOffer;
  /** Where the source serves it (its --transfer-address and port). */
  source: { host: string; port: number };
  /** The snapshot's size (the moved volume's capacity when copied) and shape, which the new volume keeps. */
  sizeBytes: number;
  accessType?: AccessType;
  fsType?: string;
  /** The offered snapshot's own record: what a moved snapshot keeps of it (a volume's move ignores it). */
  snapshot: { sourceKey: string; sourceVolumeId: string; createdAt: string };
}

/** Target: pull the offered copy into transfers/in/<move key>/, resuming from its checkpoint. */
export interface NodePullInput {
  moveKey: string;
  source: { host: string; port: number };
  offer: TransferOffer;
}

export interface NodePullResult {
  sizeBytes: number;
  chunkCount: number;
  /** Bytes received by this attempt (a resumed attempt fetches only what its checkpoint lacks). */
  fetchedBytes: number;
  resumedFromChunk: number;
  /** The pool the copy was staged in: a rollback after a failed adopt deletes what the adopt made there. */
  poolId: string;
}

/** What a pull's heartbeats carry, for `volumes describe`. */
export type MoveProgress = PullProgress & { sizeBytes: number };

/** Target: the verified copy becomes a volume of the pool, journaled and counted as a restore is. */
export interface NodeAdoptInput {
  moveKey: string;
  /** The new volume's key (drawn with the move: every retry asks for the same). */
  key: string;
  name: string;
  capacityBytes: number;
  accessType?: AccessType;
  fsType?: string;
}

/** Target: a snapshot's move adopts its copy as a snapshot that keeps what the source's record said of it. */
export interface NodeAdoptSnapshotInput {
  moveKey: string;
  /** The new snapshot's key (drawn with the move). */
  key: string;
  name: string;
  sizeBytes: number;
  accessType?: AccessType;
  fsType?: string;
  snapshot: NodeOfferResult['snapshot'];
}

/** Source: stop serving (withdraw); target: remove a staged copy (discard). */
export interface NodeMoveKeyInput {
  moveKey: string;
}

/** The agent's side of moves: its TransferSource (one port for all its moves) and its pool's layout. */
export interface NodeTransfer {
  source: TransferSource;
  layout: PoolLayout;
  endpoint: TransferEndpoint;
  /** The crash tests' failpoint in a pull (agent/failpoints.ts, move.pull-half); absent otherwise. */
  pullFailpoint?: { checkpointEveryMs: number; onCheckpoint(chunks: number, chunkCount: number): void };
}

export function createNodeActivities(deps: {
  backend: StorageBackend;
  poolId: string;
  nodeId: string;
  /** Absent when the agent serves no copies (no --transfer-port): a move to or from this node fails at once. */
  transfer?: NodeTransfer;
}) {
  const { backend, poolId, nodeId } = deps;
  const transfer = (): NodeTransfer => {
    if (deps.transfer) return deps.transfer;
    throw new DriverError(
      FailureType.FailedPrecondition,
      `node ${nodeId}'s agent serves no node-to-node copies: run it with --transfer-port (docs/volume-moves.md)`,
    );
  };
  /**
   * What the node's record is deleting because it was written off (the CO was told it is gone): marked by a
   * deletion's attempt on this agent, cleared once one answers. A create must not be handed it meanwhile: the pool's
   * create is idempotent by name (and a snapshot's by key), so a re-created name would get the doomed volume back,
   * and the record would then delete the CO's new volume. A retried deletion may keep failing while the node is
   * live (workflows/written-off-volumes.ts).
   */
  const writtenOff = new Set<string>();
  const deleting = async <T>(kind: string, input: NodeDeleteInput, work: () => Promise<T>): Promise<T> => {
    if (input.writtenOff) writtenOff.add(`${kind}/${input.key}`);
    const outcome = await work();
    writtenOff.delete(`${kind}/${input.key}`);
    // As allocations are logged: what the pool did, so a node's log alone shows each volume's life.
    log.info(`${kind} ${outcome === 'deleted' ? 'deleted' : 'already absent'}`, {
      key: input.key,
      ...(input.writtenOff ? { writtenOff: true } : {}),
    });
    return outcome;
  };
  return {
    async createVolumeOnNode(input: NodeCreateInput): Promise<NodeCreateResult> {
      return withFailureTypes(() =>
        whileHeartbeating(async () => {
          const before = await backend.getVolume(input.key);
          const record = await backend.createVolume(await volumeSpec(backend, poolId, input));
          if (writtenOff.has(`volume/${record.key}`)) throw doomed('volume', record.key, input.name);
          const fresh = before === undefined && record.key === input.key;
          log.info('volume allocated', { key: record.key, name: record.name, fresh });
          return { key: record.key, poolId, nodeId, capacityBytes: record.capacityBytes, fresh };
        }),
      );
    },

    async deleteVolumeOnNode(input: NodeDeleteInput): Promise<NodeDeleteOutcome> {
      return withFailureTypes(() =>
        whileHeartbeating(async () => {
          // A pool created after the ID was issued never held this volume (invariant: no false "deleted",
          // and no deleting a stranger's volume that happens to share the key).
          if (!ownsVolume(poolId, input.poolIdPrefix)) {
            log.info('volume deletion: the pool was replaced', { key: input.key, issuedOn: input.poolIdPrefix });
            return 'pool-replaced';
          }
          return deleting('volume', input, async () => {
            const { existed } = await backend.deleteVolume(input.key);
            return existed ? 'deleted' : 'absent';
          });
        }),
      );
    },

    async expandVolumeOnNode(input: NodeExpandInput): Promise<ExpandResult> {
      return withFailureTypes(() =>
        whileHeartbeating(async () => {
          if (!ownsVolume(poolId, input.poolIdPrefix)) {
            throw new DriverError(FailureType.NotFound, "the volume's pool has been replaced: the volume is gone");
          }
          return backend.expandVolume(input.key, input.capacityBytes);
        }),
      );
    },

    /** The copy stays on this node: the snapshot ID is built from this node's and pool's identity. */
    async createSnapshotOnNode(input: NodeSnapshotInput): Promise<NodeSnapshotResult> {
      return withFailureTypes(() =>
        whileHeartbeating(async () => {
          if (!ownsVolume(poolId, input.sourcePoolIdPrefix)) {
            throw new DriverError(
              FailureType.NotFound,
              `the pool volume ${input.sourceKey} was made on has been replaced on node ${nodeId}: the volume is gone`,
            );
          }
          const { snapshotKey, sourceKey, name } = input;
          if (writtenOff.has(`snapshot/${snapshotKey}`)) throw doomed('snapshot', snapshotKey, name);
          const record = await backend.createSnapshot({ snapshotKey, sourceKey, name });
          log.info('snapshot made', { key: record.key, name: record.name, source: record.sourceKey });
          return { ...nodeSnapshot(record), poolId, nodeId };
        }),
      );
    },

    /** Same rules as deleteVolumeOnNode: only this pool's answer, or a replaced pool, ends a deletion. */
    async deleteSnapshotOnNode(input: NodeDeleteInput): Promise<NodeDeleteOutcome> {
      return withFailureTypes(() =>
        whileHeartbeating(async () => {
          if (!ownsVolume(poolId, input.poolIdPrefix)) {
            log.info('snapshot deletion: the pool was replaced', { key: input.key, issuedOn: input.poolIdPrefix });
            return 'pool-replaced';
          }
          // A written-off member of a group goes alone: its group's deletion was answered for it.
          return deleting('snapshot', input, () =>
            backend.deleteSnapshot(input.key, input.writtenOff ? { asMember: true } : {}),
          );
        }),
      );
    },

    /**
     * Every member copied at one instant (storage/pool/snapshots.ts, createGroupSnapshot); idempotent by the group's
     * key, like a snapshot by its key.
     */
    async createGroupSnapshotOnNode(input: NodeGroupSnapshotInput): Promise<NodeGroupSnapshotResult> {
      return withFailureTypes(() =>
        whileHeartbeating(async () => {
          const replaced = input.members.filter((member) => !ownsVolume(poolId, member.sourcePoolIdPrefix));
          if (replaced.length > 0) {
            throw new DriverError(
              FailureType.NotFound,
              `the pool volumes ${replaced.map((member) => member.sourceKey).join(', ')} were made on has been ` +
                `replaced on node ${nodeId}: they are gone`,
            );
          }
          for (const member of input.members) {
            if (writtenOff.has(`snapshot/${member.snapshotKey}`))
              throw doomed('snapshot', member.snapshotKey, input.name);
          }
          const members = input.members.map(({ snapshotKey, sourceKey }) => ({ snapshotKey, sourceKey }));
          const records = await backend.createGroupSnapshot({ groupKey: input.groupKey, name: input.name, members });
          log.info('group snapshot made', { group: input.groupKey, name: input.name, members: records.length });
          return { groupKey: input.groupKey, poolId, nodeId, snapshots: records.map(nodeSnapshot) };
        }),
      );
    },

    /** Same rules as deleteSnapshotOnNode, for every member of the group at once. */
    async deleteGroupSnapshotOnNode(input: NodeGroupDeleteInput): Promise<NodeDeleteOutcome> {
      return withFailureTypes(() =>
        whileHeartbeating(async () => {
          if (!ownsVolume(poolId, input.poolIdPrefix)) {
            log.info('group snapshot deletion: the pool was replaced', { group: input.groupKey });
            return 'pool-replaced';
          }
          const outcome = await backend.deleteGroupSnapshot(input.groupKey, input.memberKeys);
          log.info(`group snapshot ${outcome === 'deleted' ? 'deleted' : 'already absent'}`, {
            group: input.groupKey,
            members: input.memberKeys.length,
          });
          return outcome;
        }),
      );
    },

    /** A page of the pool's snapshots after the position, sorted by key (so by snapshot ID); `only` for a lookup. */
    async listSnapshotPageOnNode(input: NodeSnapshotListInput): Promise<NodeSnapshotPage> {
      return withFailureTypes(async () => {
        const { only } = input;
        if (only && !ownsVolume(poolId, only.poolIdPrefix)) return { nodeId, poolId, snapshots: [], more: false };
        const { entries, more } = await pageOnNode(deps, input, async (afterKey, limit) => {
          const page = await backend.listSnapshotPage(afterKey, limit, only);
          return { entries: page.snapshots.map(nodeSnapshot), more: page.more };
        });
        return { nodeId, poolId, snapshots: entries, more };
      });
    },

    /** Undefined when this pool does not hold the volume. */
    async getVolumeOnNode(input: NodeDeleteInput): Promise<InspectedVolume | undefined> {
      return withFailureTypes(async () => {
        if (!ownsVolume(poolId, input.poolIdPrefix)) return undefined;
        const record = await backend.getVolume(input.key);
        return record && { key: record.key, name: record.name, capacityBytes: record.capacityBytes, poolId };
      });
    },

    /**
     * The source's first step of a move: the volume held, so nothing stages it (and writes to it) after the move's
     * snapshot. FailedPrecondition while it is staged: the move rolls back and says what to stop.
     */
    async fenceMoveOnNode(input: NodeFenceInput): Promise<void> {
      return withFailureTypes(async () => {
        if (!ownsVolume(poolId, input.poolIdPrefix)) {
          throw new DriverError(FailureType.NotFound, `the pool of the moved volume was replaced on node ${nodeId}`);
        }
        const fence = { moveKey: input.moveKey, targetNodeId: input.targetNodeId };
        await backend.fenceVolume(input.key, fence, input.replacing);
        log.info('volume held for its move', { key: input.key, move: input.moveKey, target: input.targetNodeId });
      });
    },

    /** Source: a rolled-back move lets its volume go (idempotent; nothing to do on a replaced pool). */
    async unfenceMoveOnNode(input: NodeFenceInput): Promise<boolean> {
      return withFailureTypes(async () => {
        if (!ownsVolume(poolId, input.poolIdPrefix)) return false;
        const released = await backend.unfenceVolume(input.key, input.moveKey);
        log.info('volume let go by its move', { key: input.key, move: input.moveKey, held: released });
        return released;
      });
    },

    /**
     * The source's part of a move: the snapshot offered to the target (its image hashed into a manifest once; a
     * retry seals the same token again).
     */
    async offerMoveOnNode(input: NodeOfferInput): Promise<NodeOfferResult> {
      return withFailureTypes(async () => {
        const { source, endpoint } = transfer();
        if (!ownsVolume(poolId, input.poolIdPrefix)) {
          throw new DriverError(FailureType.NotFound, `the pool of the moved volume was replaced on node ${nodeId}`);
        }
        const snapshot = await backend.getSnapshot(input.snapshotKey);
        if (!snapshot) {
          throw new DriverError(FailureType.NotFound, `the move's snapshot ${input.snapshotKey} is not on ${nodeId}`);
        }
        if (snapshot.groupKey !== undefined) {
          throw new DriverError(
            FailureType.FailedPrecondition,
            `snapshot ${input.snapshotKey} is a member of group snapshot ${snapshot.groupKey}: a group snapshot ` +
              'moves whole or not at all, and is not moved',
          );
        }
        const { moveKey, snapshotKey, targetPublicKey } = input;
        // A dir pool packs the snapshot's tree first, as long as a copy of its size may take (heartbeating meanwhile).
        const pool = poolOf(backend, nodeId);
        const packBudgetMs = copyTimeMs(pool.allocatedBytes(snapshot.sizeBytes), pool.copyBudget);
        const spec = { moveKey, snapshotKey, targetPublicKey, packBudgetMs };
        const offer = await whileHeartbeating(() => source.offer(spec, () => heartbeat()));
        log.info('move offered', { move: moveKey, snapshot: snapshotKey, bytes: offer.sizeBytes });
        const { accessType, fsType } = snapshot;
        return {
          offer,
          source: { host: endpoint.host, port: endpoint.port },
          sizeBytes: snapshot.sizeBytes,
          ...(accessType === undefined ? {} : { accessType }),
          ...(fsType === undefined ? {} : { fsType }),
          snapshot: {
            sourceKey: snapshot.sourceKey,
            // Moved before: its record names its source; else its source was a volume of this pool.
            sourceVolumeId:
              snapshot.sourceVolumeId ??
              formatVolumeId({ nodeId, poolIdPrefix: poolIdPrefix(poolId), key: snapshot.sourceKey }),
            createdAt: snapshot.createdAt,
          },
        };
      });
    },

    /**
     * The target's part: the copy pulled and verified, from its checkpoint on a retry. Refused before a byte is
     * fetched when the pool has no room for the volume it is to become (a staged copy is not reserved yet).
     */
    async pullMoveOnNode(input: NodePullInput): Promise<NodePullResult> {
      return withFailureTypes(async () => {
        const { layout, pullFailpoint } = transfer();
        const { offer } = input;
        const staged = await transferStatus(layout, input.moveKey);
        // The room the adopt will need, held from now on (storage/pool/transfer.ts, "Room on the target").
        if (!staged?.done) await poolOf(backend, nodeId).reserveStagedCopy(input.moveKey, offer.sizeBytes);
        const context = Context.current();
        let last: MoveProgress | undefined;
        // Between checkpoints (a connect, the manifest) the last progress is repeated, so the server keeps it.
        const timer = setInterval(() => context.heartbeat(last), HEARTBEAT_INTERVAL_MS);
        try {
          const pulled = await pullTransfer(layout, input, {
            signal: context.cancellationSignal,
            ...(pullFailpoint && { checkpointEveryMs: pullFailpoint.checkpointEveryMs }),
            onProgress: (progress) => {
              last = { ...progress, sizeBytes: offer.sizeBytes };
              context.heartbeat(last);
              if (progress.phase === 'copying') pullFailpoint?.onCheckpoint(progress.chunks, progress.chunkCount);
            },
          });
          log.info('move pulled', {
            move: input.moveKey,
            fetchedBytes: pulled.fetchedBytes,
            resumedFromChunk: pulled.resumedFromChunk,
          });
          const { sizeBytes, chunkCount, fetchedBytes, resumedFromChunk } = pulled;
          return { sizeBytes, chunkCount, fetchedBytes, resumedFromChunk, poolId };
        } finally {
          clearInterval(timer);
        }
      });
    },

    /**
     * The verified copy becomes a volume of this pool (a create from it: journaled, its room reserved, preallocated),
     * then its staging is removed. Idempotent by key: a retry finds the volume and removes what is left staged.
     */
    async adoptMoveOnNode(input: NodeAdoptInput): Promise<NodeCreateResult> {
      return withFailureTypes(() =>
        whileHeartbeating(async () => {
          const { layout } = transfer();
          const { moveKey, key, name, capacityBytes, accessType, fsType } = input;
          const before = await backend.getVolume(key);
          const record = await backend.createVolume({
            key,
            name,
            capacityBytes,
            parameters: {},
            ...(accessType === undefined ? {} : { accessType }),
            ...(fsType === undefined ? {} : { fsType }),
            contentSource: { moveKey },
          });
          await discardTransfer(layout, moveKey);
          log.info('moved volume adopted', { key: record.key, move: moveKey, fresh: before === undefined });
          return { key: record.key, poolId, nodeId, capacityBytes: record.capacityBytes, fresh: before === undefined };
        }),
      );
    },

    /**
     * Target, a snapshot's move: the verified copy becomes a snapshot under a new key (storage/pool/snapshots.ts, a
     * create whose copy is the staged one), then the staging is removed. Idempotent by key: a retry finds the
     * snapshot and removes what is left staged.
     */
    async adoptMovedSnapshotOnNode(input: NodeAdoptSnapshotInput): Promise<NodeSnapshotResult> {
      return withFailureTypes(() =>
        whileHeartbeating(async () => {
          const { layout } = transfer();
          const { moveKey, key, name, sizeBytes, accessType, fsType, snapshot } = input;
          const record = await backend.createSnapshot({
            snapshotKey: key,
            sourceKey: snapshot.sourceKey,
            name,
            moved: {
              moveKey,
              sourceVolumeId: snapshot.sourceVolumeId,
              sizeBytes,
              createdAt: snapshot.createdAt,
              ...(accessType === undefined ? {} : { accessType }),
              ...(fsType === undefined ? {} : { fsType }),
            },
          });
          await discardTransfer(layout, moveKey);
          log.info('moved snapshot adopted', { key: record.key, move: moveKey, source: snapshot.sourceVolumeId });
          return { ...nodeSnapshot(record), poolId, nodeId };
        }),
      );
    },

    /** Source: the move is done or rolled back; its offer (and token) is removed. */
    async withdrawMoveOnNode(input: NodeMoveKeyInput): Promise<boolean> {
      return withFailureTypes(async () => {
        const withdrawn = await transfer().source.withdraw(input.moveKey);
        log.info('move withdrawn', { move: input.moveKey, offered: withdrawn });
        return withdrawn;
      });
    },

    /** Target: a rolled-back move's staged copy removed. */
    async discardMoveOnNode(input: NodeMoveKeyInput): Promise<boolean> {
      return withFailureTypes(async () => {
        const discarded = await discardTransfer(transfer().layout, input.moveKey);
        log.info('move discarded', { move: input.moveKey, staged: discarded });
        return discarded;
      });
    },

    /** The moves' staged copies and offers on this pool, judged by the orphan report against the running moves. */
    async listTransfersOnNode(): Promise<NodeTransferList> {
      return withFailureTypes(async () => {
        const layout = deps.transfer?.layout ?? poolOf(backend, nodeId).layout;
        return { nodeId, poolId, ...(await listTransfers(layout, MAX_NODE_TRANSFERS)) };
      });
    },

    /** A page of the pool's volumes after the position, sorted by key (so by volume ID). */
    async listVolumePageOnNode(input: NodeListInput): Promise<NodeListPage> {
      return withFailureTypes(async () => {
        const { entries, more } = await pageOnNode(deps, input, async (afterKey, limit) => {
          const page = await backend.listVolumePage(afterKey, limit);
          const volumes = page.volumes.map((v) => ({ key: v.key, name: v.name, capacityBytes: v.capacityBytes }));
          return { entries: volumes, more: page.more };
        });
        return { nodeId, poolId, volumes: entries, more };
      });
    },
  };
}

export type NodeActivities = ReturnType<typeof createNodeActivities>;

/** The node's pool, for what only a pool of its own does (a move's copy); FailedPrecondition otherwise. */
function poolOf(backend: StorageBackend, nodeId: string): PoolBackend {
  if (backend instanceof PoolBackend) return backend;
  throw new DriverError(FailureType.FailedPrecondition, `node ${nodeId}'s backend keeps no pool of its own`);
}

function nodeSnapshot(record: SnapshotRecord): NodeSnapshot {
  const { key, name, sourceKey, sizeBytes, createdAt, groupKey, sourceVolumeId } = record;
  return {
    key,
    name,
    sourceKey,
    sizeBytes,
    createdAt,
    ...(groupKey === undefined ? {} : { groupKey }),
    ...(sourceVolumeId === undefined ? {} : { sourceVolumeId }),
  };
}

/**
 * The backend's spec: the source checked against this pool's identity (a replaced pool holds neither the snapshot
 * nor the volume) and the capacity raised to the source's size when the CO's limit allows.
 */
/** A create met what the record is still deleting: retried (ABORTED) until the deletion is done. */
function doomed(kind: 'volume' | 'snapshot', key: string, name: string): DriverError {
  return new DriverError(
    FailureType.Aborted,
    `${kind} "${name}" would be ${kind} ${key} of this pool, which was written off while the node was forgotten ` +
      `(the CO was told it is gone) and is still being deleted; a new ${kind} is made once it is gone`,
  );
}

async function volumeSpec(backend: StorageBackend, poolId: string, input: NodeCreateInput) {
  const { contentSource, limitBytes, ...spec } = input;
  if (!contentSource) return spec;
  const { poolIdPrefix: issuedOn, ...source } = contentSource;
  const what = 'snapshotKey' in source ? `snapshot ${source.snapshotKey}` : `volume ${source.volumeKey}`;
  if (!ownsVolume(poolId, issuedOn)) {
    throw new DriverError(FailureType.NotFound, `the pool ${what} was made on has been replaced: it is gone`);
  }
  const sourceBytes =
    'snapshotKey' in source
      ? (await backend.getSnapshot(source.snapshotKey))?.sizeBytes
      : (await backend.getVolume(source.volumeKey))?.capacityBytes;
  if (sourceBytes === undefined) throw new DriverError(FailureType.NotFound, `${what} does not exist on this node`);
  const fits = !limitBytes || limitBytes >= sourceBytes;
  const capacityBytes = fits && spec.capacityBytes < sourceBytes ? sourceBytes : spec.capacityBytes;
  const own: ContentSource = source;
  return { ...spec, capacityBytes, contentSource: own };
}

/**
 * A page of the pool's entries after the list position (nothing when the position is past this pool), within
 * {@link NODE_LIST_PAGE_BYTES}: `more` also when the bytes cut it short.
 */
async function pageOnNode<T>(
  deps: { poolId: string; nodeId: string },
  input: NodeListInput,
  read: (afterKey: string | undefined, limit: number) => Promise<{ entries: T[]; more: boolean }>,
): Promise<{ entries: T[]; more: boolean }> {
  const from = continueInPool(input.after, deps.nodeId, poolIdPrefix(deps.poolId));
  if (!from) return { entries: [], more: false };
  const page = await read(from.afterKey, input.maxEntries);
  const kept = withinBytes(page.entries, NODE_LIST_PAGE_BYTES);
  return { entries: kept, more: page.more || kept.length < page.entries.length };
}

/** The longest prefix (at least one entry) whose JSON fits in `bytes`. */
function withinBytes<T>(entries: T[], bytes: number): T[] {
  let used = 2;
  for (let index = 0; index < entries.length; index++) {
    used += Buffer.byteLength(JSON.stringify(entries[index])) + 1;
    if (used > bytes && index > 0) return entries.slice(0, index);
  }
  return entries;
}

const HEARTBEAT_INTERVAL_MS = 1000;

/**
 * Heartbeats while the body runs, so a node agent that dies mid-activity is noticed after the heartbeat
 * timeout (seconds) instead of the start-to-close timeout (which must allow for slow formatting).
 *
 * No heartbeat at the start: the server times the heartbeat timeout from the attempt's start until the first
 * heartbeat, so a death before it is noticed just the same, and the many activities that finish within the
 * interval save a heartbeat RPC and a mutable-state write each (docs/performance.md).
 */
async function whileHeartbeating<T>(body: () => Promise<T>): Promise<T> {
  const timer = setInterval(() => heartbeat(), HEARTBEAT_INTERVAL_MS);
  try {
    return await body();
  } finally {
    clearInterval(timer);
  }
}

/**
 * Runs an activity body and turns a DriverError into an ApplicationFailure of the same type, so the type
 * survives the trip through Temporal to csi/errors.ts. Other errors pass through and are retried.
 */
export async function withFailureTypes<T>(body: () => Promise<T>): Promise<T> {
  try {
    return await body();
  } catch (error) {
    if (error instanceof DriverError) {
      throw ApplicationFailure.create({
        type: error.type,
        message: error.message,
        nonRetryable: NON_RETRYABLE_TYPES.includes(error.type),
      });
    }
    throw error;
  }
}
