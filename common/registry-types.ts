/** The durable node registry's records. No Node built-ins: workflow code imports this. */

/** What a node agent reports at start and with every heartbeat. */
export interface NodeReport {
  nodeId: string;
  poolId: string;
  backend: string;
  capacityBytes: number;
  availableBytes: number;
  volumeCount: number;
  agentVersion: string;
}

/** A node as the registry remembers it: every node ever seen stays until an operator forgets it. */
export interface NodeRecord extends NodeReport {
  /** Epoch milliseconds (workflow time) of the first report. */
  firstSeen: number;
  /** Epoch milliseconds (workflow time) of the latest report. */
  lastHeartbeat: number;
}

/** A registry record with liveness judged by the reader's clock. */
export interface NodeView extends NodeRecord {
  live: boolean;
}

/** The registry workflow's memo keys: Record<nodeId, NodeRecord> and Record<nodeId, ForgottenNode>. */
export const REGISTRY_MEMO_KEY = 'nodes';
export const FORGOTTEN_MEMO_KEY = 'forgotten';

/** A node an operator declared gone for good, kept so the decision stays visible. */
export interface ForgottenNode {
  nodeId: string;
  reason: string;
  /** ISO 8601. */
  at: string;
  lastHeartbeat: number;
}

export const HEARTBEAT_INTERVAL_MS = 10_000;
/** Three missed heartbeats and a node is no longer offered new volumes. */
export const LIVENESS_WINDOW_MS = 3 * HEARTBEAT_INTERVAL_MS;

export function isLive(record: NodeRecord, nowMs: number): boolean {
  return nowMs - record.lastHeartbeat < LIVENESS_WINDOW_MS;
}
