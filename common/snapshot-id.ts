/**
 * A snapshot ID names the node holding the copy and the identity of the pool it was made on, as a volume ID does,
 * so DeleteSnapshot needs no lookup: `s1_<node-id>_<pool-id prefix>_<snapshot key>`. The key is derived from the
 * CSI snapshot name and the source volume ID (operations/snapshot-key.ts), so every controller replica, and every
 * retry, asks the node for the same key. The longest ID is exactly the CSI limit of 128 bytes.
 * No Node built-ins here: workflow code imports this file.
 */
import { MAX_NODE_ID_LENGTH, isValidNodeId } from './node-id';
import { POOL_ID_PREFIX_LENGTH, VOLUME_ID_MAX_BYTES } from './volume-id';

export const SNAPSHOT_ID_MAX_BYTES = VOLUME_ID_MAX_BYTES;
const VERSION = 's1';
const SNAPSHOT_KEY = /^[0-9a-f]{32}$/;
const POOL_PREFIX = /^[0-9a-f]{16}$/;

export interface SnapshotIdParts {
  nodeId: string;
  /** The first 16 hex digits of the pool identity (a UUID without dashes). */
  poolIdPrefix: string;
  /** 32 hex digits; the snapshot's name inside its pool. */
  key: string;
}

export function formatSnapshotId(parts: SnapshotIdParts): string {
  if (!isValidNodeId(parts.nodeId) || !POOL_PREFIX.test(parts.poolIdPrefix) || !SNAPSHOT_KEY.test(parts.key)) {
    throw new Error(`cannot form a snapshot ID from ${JSON.stringify(parts)}`);
  }
  return [VERSION, parts.nodeId, parts.poolIdPrefix, parts.key].join('_');
}

/** Undefined for anything this driver could not have issued. */
export function parseSnapshotId(snapshotId: string): SnapshotIdParts | undefined {
  if (snapshotId.length > SNAPSHOT_ID_MAX_BYTES) return undefined;
  const fields = snapshotId.split('_');
  if (fields.length !== 4) return undefined;
  const [version, nodeId, prefix, key] = fields as [string, string, string, string];
  if (version !== VERSION || !isValidNodeId(nodeId) || !POOL_PREFIX.test(prefix) || !SNAPSHOT_KEY.test(key)) {
    return undefined;
  }
  return { nodeId, poolIdPrefix: prefix, key };
}

const LONGEST = VERSION.length + 1 + MAX_NODE_ID_LENGTH + 1 + POOL_ID_PREFIX_LENGTH + 1 + 32;
if (LONGEST > SNAPSHOT_ID_MAX_BYTES) throw new Error('snapshot ID layout exceeds the CSI limit');
