/**
 * A position in the list of every volume sorted by volume ID: "the volumes whose ID sorts after this string".
 * ListVolumes's starting_token is one: the last volume ID of the previous page, or `v1_<node-id>_~` (past every
 * volume of that node: "~" sorts after every character of a volume ID) when a page ended between nodes. An empty
 * position is the start. Node IDs contain no "_", so each node's volumes form one run in this order, sorted by pool
 * prefix, then key: a node continues a listing from a key, with no lookup and no state kept between pages.
 * No Node built-ins here: workflow code imports this file.
 */
import { isValidNodeId } from './node-id';
import { parseVolumeId, volumeIdPrefix } from './volume-id';

export const LIST_START = '';
/** Entries per page at most, whatever the caller asks (CSI lets the plugin return fewer, with a next_token). */
export const MAX_PAGE_ENTRIES = 1000;
const PAST = '~';

/** Past every volume the node may hold. */
export function pastNode(nodeId: string): string {
  return `${volumeIdPrefix(nodeId)}${PAST}`;
}

/** Only positions this driver issues (or an old one: a volume ID) are accepted; anything else is unknown. */
export function isListPosition(position: string): boolean {
  if (position === LIST_START || parseVolumeId(position)) return true;
  if (!position.endsWith(`_${PAST}`)) return false;
  const [version, nodeId, ...rest] = position.slice(0, -PAST.length - 1).split('_');
  return (
    version === 'v1' &&
    rest.length === 0 &&
    nodeId !== undefined &&
    isValidNodeId(nodeId) &&
    pastNode(nodeId) === position
  );
}

/** True while some volume of the node may still come after the position. */
export function nodeRemains(nodeId: string, position: string): boolean {
  return pastNode(nodeId) > position;
}

/** Nodes in the order their volume IDs sort. */
export function byVolumeIdOrder(a: string, b: string): number {
  const left = volumeIdPrefix(a);
  const right = volumeIdPrefix(b);
  return left < right ? -1 : left > right ? 1 : 0;
}

/**
 * Where a pool continues after the position: from its first key (`{}`), after a key, or not at all (`undefined`:
 * the position is past all of it). `poolPrefix` is the pool identity's 16-hex prefix, as in the pool's volume IDs.
 */
export function continueInPool(
  position: string,
  nodeId: string,
  poolPrefix: string,
): { afterKey?: string } | undefined {
  const own = `${volumeIdPrefix(nodeId)}${poolPrefix}_`;
  if (position < own) return {};
  return position.startsWith(own) ? { afterKey: position.slice(own.length) } : undefined;
}
