import { defineSearchAttributeKey } from '@temporalio/common';
import { defineSignal, defineUpdate } from '@temporalio/workflow';

/**
 * Every name the driver gives, in one place so that no import runs up a floor: the IDs it issues (volume and snapshot
 * IDs, below), and what clients and workflows share through Temporal (workflow IDs and task queues, prefixed by the CSI
 * driver name so that several drivers, or test runs, can share one namespace without seeing each other's work;
 * workflow types; search attributes; signals and updates) with the node record's shape as its memo holds it. No Node
 * built-ins: workflow code imports this.
 */

/*
 * The IDs this driver issues. A volume ID names its home node and the identity of the pool it was issued on, so
 * DeleteVolume needs no lookup: `v1_<node-id>_<pool-id prefix>_<volume key>`. A snapshot ID names the node holding
 * the copy and its pool the same way: `s1_<node-id>_<pool-id prefix>_<snapshot key>`; its key is random, one per
 * create run (operations/snapshot-key.ts), so an ID names one copy only. Node IDs contain no "_", so the four fields
 * split unambiguously, and the longest ID is exactly the CSI limit of 128 bytes.
 */

/**
 * Node IDs are lower-case DNS names (as Kubernetes node names usually are) of at most 75 characters, which is
 * what the 128-byte volume ID leaves for them. No "_", so volume IDs split unambiguously.
 */
export const MAX_NODE_ID_LENGTH = 75;
const NODE_ID = /^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/;

export function isValidNodeId(nodeId: string): boolean {
  return nodeId.length <= MAX_NODE_ID_LENGTH && NODE_ID.test(nodeId);
}

export const VOLUME_ID_MAX_BYTES = 128;
export const SNAPSHOT_ID_MAX_BYTES = VOLUME_ID_MAX_BYTES;
const VOLUME_VERSION = 'v1';
const SNAPSHOT_VERSION = 's1';
const GROUP_SNAPSHOT_VERSION = 'g1';
/** 64 bits of the pool UUID tell a re-created pool from the old one. */
export const POOL_ID_PREFIX_LENGTH = 16;
const KEY = /^[0-9a-f]{32}$/;
const POOL_PREFIX = /^[0-9a-f]{16}$/;

export interface VolumeIdParts {
  nodeId: string;
  /** The first 16 hex digits of the pool identity (a UUID without dashes). */
  poolIdPrefix: string;
  /** 32 hex digits; the volume's name inside its pool. Never derived from user input. */
  key: string;
}

/** The node, the first 16 hex digits of the pool identity, and the 32-hex key: as in a volume ID. */
export type SnapshotIdParts = VolumeIdParts;

export function poolIdPrefix(poolId: string): string {
  return poolId.replace(/-/g, '').slice(0, POOL_ID_PREFIX_LENGTH);
}

/**
 * The one check that a volume ID's pool prefix names this pool: a pool created after the ID was issued never held
 * the volume, even if a volume of the same key lives there now.
 */
export function ownsVolume(poolId: string, issuedOnPrefix: string): boolean {
  return issuedOnPrefix === poolIdPrefix(poolId);
}

/** What every volume ID of the node starts with; no other node's IDs do (node IDs contain no "_"). */
export function volumeIdPrefix(nodeId: string): string {
  return `${VOLUME_VERSION}_${nodeId}_`;
}

export function formatVolumeId(parts: VolumeIdParts): string {
  return formatScopedId(VOLUME_VERSION, parts, 'volume ID');
}

/** Returns undefined for anything this driver could not have issued. */
export function parseVolumeId(volumeId: string): VolumeIdParts | undefined {
  return parseScopedId(VOLUME_VERSION, volumeId);
}

export function formatSnapshotId(parts: SnapshotIdParts): string {
  return formatScopedId(SNAPSHOT_VERSION, parts, 'snapshot ID');
}

/** Undefined for anything this driver could not have issued. */
export function parseSnapshotId(snapshotId: string): SnapshotIdParts | undefined {
  return parseScopedId(SNAPSHOT_VERSION, snapshotId);
}

/**
 * A group snapshot's ID, `g1_<node-id>_<pool-id prefix>_<group key>`: like a snapshot ID, the node holding its
 * members and their pool, so DeleteVolumeGroupSnapshot and GetVolumeGroupSnapshot need no lookup to know whose
 * queue gets the work. The group key is random, one per create run, as a snapshot key is.
 */
export function formatGroupSnapshotId(parts: SnapshotIdParts): string {
  return formatScopedId(GROUP_SNAPSHOT_VERSION, parts, 'group snapshot ID');
}

/** Undefined for anything this driver could not have issued. */
export function parseGroupSnapshotId(groupSnapshotId: string): SnapshotIdParts | undefined {
  return parseScopedId(GROUP_SNAPSHOT_VERSION, groupSnapshotId);
}

/** `<version>_<node-id>_<pool-id prefix>_<key>`, the form volume IDs and snapshot IDs share; `what` names the kind. */
function formatScopedId(version: string, parts: VolumeIdParts, what: string): string {
  if (!isValidNodeId(parts.nodeId) || !POOL_PREFIX.test(parts.poolIdPrefix) || !KEY.test(parts.key)) {
    throw new Error(`cannot form a ${what} from ${JSON.stringify(parts)}`);
  }
  return [version, parts.nodeId, parts.poolIdPrefix, parts.key].join('_');
}

export function parseScopedId(version: string, id: string): VolumeIdParts | undefined {
  if (id.length > VOLUME_ID_MAX_BYTES) return undefined;
  const fields = id.split('_');
  if (fields.length !== 4) return undefined;
  const [found, nodeId, prefix, key] = fields as [string, string, string, string];
  if (found !== version || !isValidNodeId(nodeId) || !POOL_PREFIX.test(prefix) || !KEY.test(key)) {
    return undefined;
  }
  return { nodeId, poolIdPrefix: prefix, key };
}

// The budget check that keeps the longest ID within the CSI limit (both versions are two characters).
const LONGEST = VOLUME_VERSION.length + 1 + MAX_NODE_ID_LENGTH + 1 + POOL_ID_PREFIX_LENGTH + 1 + 32;
if (
  LONGEST > VOLUME_ID_MAX_BYTES ||
  SNAPSHOT_VERSION.length !== VOLUME_VERSION.length ||
  GROUP_SNAPSHOT_VERSION.length !== VOLUME_VERSION.length
)
  throw new Error('the ID layout exceeds the CSI limit');

/* The names shared through Temporal. */

export function controlTaskQueue(driverName: string): string {
  return `${driverName}/control`;
}

/** Carries activities only: the node agent runs no workflow code. */
export function nodeTaskQueue(driverName: string, nodeId: string): string {
  return `${driverName}/node/${nodeId}`;
}

export function createWorkflowId(driverName: string, volumeName: string): string {
  return `${driverName}/create/${volumeName}`;
}

export function deleteWorkflowId(driverName: string, volumeId: string): string {
  return `${driverName}/delete/${volumeId}`;
}

/** One per CSI snapshot name: a retry, from any replica, attaches; the name with another source is ALREADY_EXISTS. */
export function createSnapshotWorkflowId(driverName: string, snapshotName: string): string {
  return `${driverName}/snapshot/${snapshotName}`;
}

export function deleteSnapshotWorkflowId(driverName: string, snapshotId: string): string {
  return `${driverName}/delete-snapshot/${snapshotId}`;
}

/** One per CSI group snapshot name: a retry attaches; the name with other volumes is ALREADY_EXISTS. */
export function createGroupSnapshotWorkflowId(driverName: string, groupName: string): string {
  return `${driverName}/group-snapshot/${groupName}`;
}

export function deleteGroupSnapshotWorkflowId(driverName: string, groupSnapshotId: string): string {
  return `${driverName}/delete-group-snapshot/${groupSnapshotId}`;
}

/**
 * One move per volume (workflows/move-volume.ts): a second `volumes move` of the volume attaches to the first, and
 * one that ended with the volume copied is answered from it; only a move that failed (rolled back) may start again.
 */
/**
 * The PV a move binds its claim to (kubernetes/claim-switch.ts), or the VolumeSnapshotContent a snapshot's move binds
 * its VolumeSnapshot to (kubernetes/snapshot-switch.ts): the old object's name with the move's mark (`-m` and 8 hex
 * digits of the move key), one moved again replacing its mark, so names do not grow.
 */
export function movedObjectName(oldName: string, moveKey: string): string {
  return `${oldName.replace(/-m[0-9a-f]{8}$/, '').slice(0, 200)}-m${moveKey.slice(0, 8)}`;
}

export function moveWorkflowId(driverName: string, volumeId: string): string {
  return `${driverName}/move/${volumeId}`;
}

/** One listing of snapshots; `runTag` keeps concurrent listings apart (see oneOffTag). */
export function listSnapshotsWorkflowId(driverName: string, runTag: string): string {
  return `${driverName}/list-snapshots/${runTag}`;
}

/** One workflow per target size: a later, larger request is a new operation, a retry attaches. */
export function expandWorkflowId(driverName: string, volumeId: string, capacityBytes: number): string {
  return `${driverName}/expand/${volumeId}/${capacityBytes}`;
}

/** A one-off read of a volume on its node; `runTag` keeps concurrent reads apart (see oneOffTag). */
export function inspectWorkflowId(driverName: string, volumeId: string, runTag: string): string {
  return `${driverName}/inspect/${volumeId}/${runTag}`;
}

/** One page of the moves' transfers on the pools (the orphan report); `runTag` as for listWorkflowId. */
export function listTransfersWorkflowId(driverName: string, runTag: string): string {
  return `${driverName}/list-transfers/${runTag}`;
}

/** One page of ListVolumes; `runTag` keeps concurrent listings apart (see oneOffTag). */
export function listWorkflowId(driverName: string, runTag: string): string {
  return `${driverName}/list/${runTag}`;
}

/**
 * A tag for the ID of a short read-only workflow nobody attaches to. Called by clients only: workflow code never
 * builds these IDs (Date.now and Math.random would be replay-safe there, but this keeps the rule simple).
 */
export function oneOffTag(): string {
  return `${Date.now()}-${Math.random().toString(16).slice(2)}`;
}

/** One long-lived record per node (workflows/node-presence.ts): no workflow hears from every node. */
export function nodeRecordWorkflowId(driverName: string, nodeId: string): string {
  return `${driverName}/node-record/${nodeId}`;
}

export const TOPOLOGY_NODE_KEY = 'topology.durable-csi.io/node';

/** The CSI driver name used when --driver-name is not given. */
export const DEFAULT_DRIVER_NAME = 'durable-csi.io';

/** Long-lived node records: running by design, never "pending". */
export const NODE_RECORD_WORKFLOW_TYPES: readonly string[] = ['nodePresence'];

/** The workflow types that are volume operations: not the node records, nor the short-lived list and inspect. */
export const OPERATION_WORKFLOW_TYPES = [
  'createVolume',
  'deleteVolume',
  'expandVolume',
  'createSnapshot',
  'deleteSnapshot',
  'createVolumeGroupSnapshot',
  'deleteVolumeGroupSnapshot',
  'moveVolume',
  'moveSnapshot',
] as const;

/** The move workflows (a volume's, a snapshot's): what they make is named `move-<move key>` (their VolumeName). */
export const MOVE_WORKFLOW_TYPES: readonly string[] = ['moveVolume', 'moveSnapshot'];

/** The visibility clause `WorkflowType IN (...)` selecting the volume operations. */
export function operationTypesClause(): string {
  return `WorkflowType IN (${OPERATION_WORKFLOW_TYPES.map((type) => `"${type}"`).join(', ')})`;
}

/** Typed keys for the search attributes registered by temporal-dev (and by operators on a real cluster). */
export const VolumeIdKey = defineSearchAttributeKey('DurableCsiVolumeId', 'KEYWORD');
export const VolumeNameKey = defineSearchAttributeKey('DurableCsiVolumeName', 'KEYWORD');
export const NodeIdKey = defineSearchAttributeKey('DurableCsiNodeId', 'KEYWORD');
export const OperationKey = defineSearchAttributeKey('DurableCsiOperation', 'KEYWORD');
export const PhaseKey = defineSearchAttributeKey('DurableCsiPhase', 'KEYWORD');
export const WaitingSinceKey = defineSearchAttributeKey('DurableCsiWaitingSince', 'DATETIME');
/**
 * The claim a create was made for (external-provisioner's --extra-create-metadata: csi.storage.k8s.io/pvc/*), set
 * when the create starts, so operators find a claim's operations by the names they know (`volumes describe --pvc`).
 */
export const PvcNamespaceKey = defineSearchAttributeKey('DurableCsiPvcNamespace', 'KEYWORD');
export const PvcNameKey = defineSearchAttributeKey('DurableCsiPvcName', 'KEYWORD');
/** Every key above: what temporal/search-attributes.ts registers. */
export const SEARCH_ATTRIBUTE_KEYS = [
  VolumeIdKey,
  VolumeNameKey,
  NodeIdKey,
  OperationKey,
  PhaseKey,
  WaitingSinceKey,
  PvcNamespaceKey,
  PvcNameKey,
];
/**
 * Keys added after 0.2.0 that a controller starts without (warning, with the commands that register them), so that
 * an upgrade from the release before needs no step ahead of its rollout; only what they add is missing meanwhile.
 */
export const OPTIONAL_SEARCH_ATTRIBUTE_KEYS: readonly string[] = [PvcNamespaceKey.name, PvcNameKey.name];

export type Phase = 'placing' | 'waiting-for-node' | 'running' | 'done' | 'failed';
/**
 * A move's phases (workflows/move-volume.ts): each step an activity on one node's queue (the claim's on the control
 * queue), then its end: `moved` (the claim bound to the new volume, the old one deleted), `copied` (no Kubernetes:
 * the new volume is on the target, the source kept as the CO's) or `rolled-back`.
 */
export type MovePhase =
  | 'checking'
  | 'holding'
  | 'snapshotting'
  | 'offering'
  | 'pulling'
  | 'adopting'
  | 'switching'
  | 'releasing'
  | 'retiring'
  | 'moved'
  | 'copied'
  | 'rolling-back'
  | 'rolled-back'
  | 'waiting-for-node';
/** The phase of a node record (workflows/node-presence.ts), whose DurableCsiOperation is "node". */
export type NodePhase = 'live' | 'offline' | 'forgotten';

/**
 * The operator's decision that a node is gone for good (`durable-csi nodes forget`). Operations waiting on
 * that node stop waiting and end with this recorded outcome; nothing else ever gives up on a node.
 */
export interface ForgetNotice {
  nodeId: string;
  reason: string;
  /** ISO 8601, when the operator decided. */
  at: string;
}

/** To an operation waiting on a node: that node is forgotten (operations/forget-node.ts sends it). */
export const nodeForgottenSignal = defineSignal<[ForgetNotice]>('nodeForgotten');

/**
 * A node's record tells the operations waiting on that node when it goes offline or comes back (through the
 * announceLiveness activity), so their phase, search attributes and UI details follow the node while they wait.
 */
export interface LivenessNotice {
  nodeId: string;
  live: boolean;
  /** ISO 8601: when the record saw the change. */
  at: string;
}

export const nodeLivenessSignal = defineSignal<[LivenessNotice]>('nodeLiveness');

/**
 * To a node's record: a deletion ended with the node forgotten, so the volume is to be deleted on the node when it
 * returns with that pool (sent by an activity, with signalWithStart: a lost record is made again).
 */
export const writeOffVolumeSignal = defineSignal<[WrittenOffVolume]>('writeOffVolume');

/**
 * The decision that the node is gone for good (`durable-csi nodes forget`, or the Kubernetes Node policy), asked of
 * the node's record, which refuses it while its node answers (returns the decision kept).
 */
export const forgetNodeRecordUpdate = defineUpdate<ForgottenNode, [ForgetNotice]>('forgetNodeRecord');
/** To a node's record: continue as new at the next point where no presence activity is pending. */
export const renewRecordSignal = defineSignal('renewRecord');

/** What a node agent reports when it (re)registers and with every presence heartbeat. */
export interface NodeReport {
  nodeId: string;
  poolId: string;
  backend: string;
  capacityBytes: number;
  availableBytes: number;
  volumeCount: number;
  /** Snapshot copies in the pool. */
  snapshotCount?: number;
  agentVersion: string;
  /**
   * How long the record waits for this agent's next presence heartbeat before it shows the node offline (the
   * agent's --presence-timeout). Absent from agents before 0.3.0: their records keep PRESENCE_HEARTBEAT_TIMEOUT_MS.
   */
  presenceTimeoutMs?: number;
  /**
   * Where the agent serves node-to-node copies for moves, and its public key for them (storage/pool/transfer.ts);
   * absent from agents run without --transfer-port, and from agents before moves existed: no move goes to or from
   * such a node.
   */
  transfer?: TransferEndpoint;
}

/** A node's side of node-to-node copies, as its report publishes it (docs/volume-moves.md). */
export interface TransferEndpoint {
  host: string;
  port: number;
  /** transferPublicKey: base64url of the raw X25519 key a source seals a move's token to. */
  publicKey: string;
}

/** A node as its record remembers it. */
export interface NodeRecord extends NodeReport {
  /** Epoch milliseconds (workflow time) of the first report this record received. */
  firstSeen: number;
  /** Epoch milliseconds of the latest report or presence heartbeat. */
  lastHeartbeat: number;
}

/** A node record with liveness as Temporal sees it now (the node agent holds its presence activity). */
export interface NodeView extends NodeRecord {
  live: boolean;
}

/** A node an operator (or a policy) declared gone for good: operations waiting for it end with this reason. */
export interface ForgottenNode {
  nodeId: string;
  reason: string;
  /** ISO 8601. */
  at: string;
  /** Epoch milliseconds of the last report before the decision; absent for a node that never reported. */
  lastHeartbeat?: number;
}

/**
 * A volume whose deletion ended with the decision that its node is gone (`node-forgotten`): the CO was told it is
 * gone, but nothing could delete it. Its node's record keeps it until the node returns with the pool it names and
 * deletes it there for real (or returns with another pool: then the volume is gone with the old pool).
 */
export interface WrittenOffVolume {
  /** The volume's ID, or for a snapshot its snapshot ID. */
  volumeId: string;
  key: string;
  poolIdPrefix: string;
  /** The forget's reason. */
  reason: string;
  /** A snapshot copy (docs/snapshots.md); absent for a volume. */
  kind?: 'snapshot';
  /**
   * A create's allocation, written off when a forget ended its completion (workflows/create-volume.ts): its key was
   * never issued, and the pool that may hold it is whichever the node had when the attempt ran, which may have
   * replaced the one placement read. It is deleted on whatever pool the node returns with (a random key names no
   * other volume); `poolIdPrefix` is placement's, for the ID shown in logs.
   */
  anyPool?: true;
}

/** What the node record workflow keeps in its memo, under {@link NODE_MEMO_KEY}. */
export interface NodeRecordMemo {
  nodeId: string;
  /** Absent until the node's agent first reports (a record can be made by `nodes forget` alone). */
  record?: NodeRecord;
  live: boolean;
  forgotten?: ForgottenNode;
  /** Written-off volumes still to delete on the node when it returns (the list itself is kept in the workflow). */
  writtenOff?: number;
}

export const NODE_MEMO_KEY = 'node';

/**
 * A node agent that stops heartbeating its presence activity for this long is offline (the server times the
 * activity out): what a record holds for an agent whose report names no timeout of its own (before 0.3.0), and
 * what every hold of a record run started before 0.3.0 keeps (workflows/node-presence.ts).
 */
export const PRESENCE_HEARTBEAT_TIMEOUT_MS = 30_000;

/**
 * The agent's --presence-timeout: how soon a node whose agent died shows offline. The agent heartbeats every
 * `presenceHeartbeatEveryMs` of it, so a longer timeout costs Temporal fewer heartbeats (docs/scale.md).
 */
export const DEFAULT_PRESENCE_TIMEOUT_MS = 60_000;
export const MIN_PRESENCE_TIMEOUT_MS = 20_000;
export const MAX_PRESENCE_TIMEOUT_MS = 10 * 60_000;

/**
 * How often a presence hold heartbeats for a given heartbeat timeout: as seldom as leaves a margin of a sixth of
 * the timeout and at least 10 s (an agent's event loop held up, a slow RPC) before the server would time the hold
 * out, and never less often than three times per timeout. 60 s -> every 50 s; 30 s (a record before 0.3.0) -> 20 s.
 * A heartbeat missed by more than the margin shows a live node offline until its agent answers the report that
 * follows at once: a visible flap, never a false answer (an offline node is never taken for one without volumes).
 */
export function presenceHeartbeatEveryMs(timeoutMs: number): number {
  return Math.max(timeoutMs / 3, timeoutMs - Math.max(10_000, timeoutMs / 6));
}

/**
 * How a node's record is started where it may not run yet (its agent, `nodes forget`, a write-off): as an offline
 * record that waits for its node, visible to readers at once (memo and search attributes set at start).
 */
export function nodeRecordStart(driverName: string, nodeId: string) {
  const memo: NodeRecordMemo = { nodeId, live: false };
  const phase: NodePhase = 'offline';
  return {
    workflowId: nodeRecordWorkflowId(driverName, nodeId),
    taskQueue: controlTaskQueue(driverName),
    args: [{ driverName, nodeId }] as [{ driverName: string; nodeId: string }],
    memo: { [NODE_MEMO_KEY]: memo },
    typedSearchAttributes: [
      { key: OperationKey, value: 'node' },
      { key: NodeIdKey, value: nodeId },
      { key: PhaseKey, value: phase },
    ],
  };
}
