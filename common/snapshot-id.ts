/**
 * A snapshot ID names the node holding the copy and the identity of the pool it was made on, as a volume ID does,
 * so DeleteSnapshot needs no lookup: `s1_<node-id>_<pool-id prefix>_<snapshot key>`. The key is random, one per
 * create run (operations/snapshot-key.ts), so an ID names one copy only. The longest ID is exactly the CSI limit of
 * 128 bytes.
 * No Node built-ins here: workflow code imports this file.
 */
import { MAX_NODE_ID_LENGTH } from './node-id';
import { POOL_ID_PREFIX_LENGTH, VOLUME_ID_MAX_BYTES, formatScopedId, parseScopedId } from './volume-id';
import type { VolumeIdParts } from './volume-id';

export const SNAPSHOT_ID_MAX_BYTES = VOLUME_ID_MAX_BYTES;
const VERSION = 's1';

/** The node, the first 16 hex digits of the pool identity, and the 32-hex key: as in a volume ID. */
export type SnapshotIdParts = VolumeIdParts;

export function formatSnapshotId(parts: SnapshotIdParts): string {
  return formatScopedId(VERSION, parts, 'snapshot ID');
}

/** Undefined for anything this driver could not have issued. */
export function parseSnapshotId(snapshotId: string): SnapshotIdParts | undefined {
  return parseScopedId(VERSION, snapshotId);
}

const LONGEST = VERSION.length + 1 + MAX_NODE_ID_LENGTH + 1 + POOL_ID_PREFIX_LENGTH + 1 + 32;
if (LONGEST > SNAPSHOT_ID_MAX_BYTES) throw new Error('snapshot ID layout exceeds the CSI limit');
