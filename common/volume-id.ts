/**
 * A volume ID names its home node and the identity of the pool it was issued on, so DeleteVolume needs no
 * lookup: `v1_<node-id>_<pool-id prefix>_<volume key>`. The node ID may not contain "_" (see node-id.ts), so
 * the four fields split unambiguously. The longest ID is exactly the CSI limit of 128 bytes.
 * No Node built-ins here: workflow code imports this file.
 */
import { MAX_NODE_ID_LENGTH, isValidNodeId } from './node-id';

export const VOLUME_ID_MAX_BYTES = 128;
const VERSION = 'v1';
/** 64 bits of the pool UUID tell a re-created pool from the old one. */
export const POOL_ID_PREFIX_LENGTH = 16;
const VOLUME_KEY = /^[0-9a-f]{32}$/;
const POOL_PREFIX = /^[0-9a-f]{16}$/;

export interface VolumeIdParts {
  nodeId: string;
  /** The first 16 hex digits of the pool identity (a UUID without dashes). */
  poolIdPrefix: string;
  /** 32 hex digits; the volume's name inside its pool. Never derived from user input. */
  key: string;
}

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
  return `${VERSION}_${nodeId}_`;
}

export function formatVolumeId(parts: VolumeIdParts): string {
  return formatScopedId(VERSION, parts, 'volume ID');
}

/** Returns undefined for anything this driver could not have issued. */
export function parseVolumeId(volumeId: string): VolumeIdParts | undefined {
  return parseScopedId(VERSION, volumeId);
}

/**
 * `<version>_<node-id>_<pool-id prefix>_<key>`, the form volume IDs and snapshot IDs (common/snapshot-id.ts) share;
 * `what` names the kind of ID in the error.
 */
export function formatScopedId(version: string, parts: VolumeIdParts, what: string): string {
  if (!isValidNodeId(parts.nodeId) || !POOL_PREFIX.test(parts.poolIdPrefix) || !VOLUME_KEY.test(parts.key)) {
    throw new Error(`cannot form a ${what} from ${JSON.stringify(parts)}`);
  }
  return [version, parts.nodeId, parts.poolIdPrefix, parts.key].join('_');
}

export function parseScopedId(version: string, id: string): VolumeIdParts | undefined {
  if (id.length > VOLUME_ID_MAX_BYTES) return undefined;
  const fields = id.split('_');
  if (fields.length !== 4) return undefined;
  const [found, nodeId, prefix, key] = fields as [string, string, string, string];
  if (found !== version || !isValidNodeId(nodeId) || !POOL_PREFIX.test(prefix) || !VOLUME_KEY.test(key)) {
    return undefined;
  }
  return { nodeId, poolIdPrefix: prefix, key };
}

// The budget check that keeps the longest ID within the CSI limit.
const LONGEST = VERSION.length + 1 + MAX_NODE_ID_LENGTH + 1 + POOL_ID_PREFIX_LENGTH + 1 + 32;
if (LONGEST > VOLUME_ID_MAX_BYTES) throw new Error('volume ID layout exceeds the CSI limit');
