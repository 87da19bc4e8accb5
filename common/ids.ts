/**
 * The IDs this driver issues. A volume ID names its home node and the identity of the pool it was issued on, so
 * DeleteVolume needs no lookup: `v1_<node-id>_<pool-id prefix>_<volume key>`. A snapshot ID names the node holding
 * the copy and its pool the same way: `s1_<node-id>_<pool-id prefix>_<snapshot key>`; its key is random, one per
 * create run (operations/snapshot-key.ts), so an ID names one copy only. Node IDs contain no "_", so the four fields
 * split unambiguously, and the longest ID is exactly the CSI limit of 128 bytes.
 * No Node built-ins here: workflow code imports this file.
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
if (LONGEST > VOLUME_ID_MAX_BYTES || SNAPSHOT_VERSION.length !== VOLUME_VERSION.length)
  throw new Error('the ID layout exceeds the CSI limit');
