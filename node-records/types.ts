/** The node records' types. No Node built-ins: workflow code imports this. */

/** What a node agent reports when it (re)registers and with every presence heartbeat. */
export interface NodeReport {
  nodeId: string;
  poolId: string;
  backend: string;
  capacityBytes: number;
  availableBytes: number;
  volumeCount: number;
  /** Snapshot copies in the pool; absent in reports of agents before this field. */
  snapshotCount?: number;
  agentVersion: string;
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
  /** A snapshot copy (docs/snapshots.md); absent for a volume, as in records written before snapshots. */
  kind?: 'snapshot';
  /**
   * A create's allocation, written off when a forget ended its completion (workflows/create-volume.ts): its key was
   * never issued, and the pool that may hold it is whichever the node had when the attempt ran, which may have
   * replaced the one placement read. It is deleted on whatever pool the node returns with (a random key names no
   * other volume); `poolIdPrefix` is placement's, for the ID shown in logs. Absent in records before this field.
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
 * activity out). The SDK sends heartbeats at 80% of it, so a live record is at most ~24 s old.
 */
export const PRESENCE_HEARTBEAT_TIMEOUT_MS = 30_000;
