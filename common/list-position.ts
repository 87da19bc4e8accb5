/**
 * A position in the list of every volume sorted by volume ID, or of every snapshot sorted by snapshot ID: "the
 * entries whose ID sorts after this string". ListVolumes's and ListSnapshots's starting_token is one: the last ID
 * of the previous page, or `<version>_<node-id>_~` (past every entry of that node: "~" sorts after every character
 * of an ID) when a page ended between nodes. An empty position is the start. Node IDs contain no "_", so each
 * node's entries form one run in this order, sorted by pool prefix, then key: a node continues a listing from a
 * key, with no lookup and no state kept between pages. Volume IDs (`v1_`) and snapshot IDs (`s1_`) differ only in
 * their first letter, so nodes come in the same order in both lists, and a position says which list it is of.
 * No Node built-ins here: workflow code imports this file.
 */
import { isValidNodeId, parseScopedId, volumeIdPrefix } from './names';

/** Which list a position is of: the version its IDs start with. */
export type ListedIds = 'v1' | 's1';

export const LIST_START = '';
/** Entries per page at most, whatever the caller asks (CSI lets the plugin return fewer, with a next_token). */
export const MAX_PAGE_ENTRIES = 1000;
const PAST = '~';

/** Past every entry the node may hold, in the list of volumes (the default) or of snapshots. */
export function pastNode(nodeId: string, ids: ListedIds = 'v1'): string {
  return `${ids}_${nodeId}_${PAST}`;
}

/** Only positions this driver issues (or an old one: an ID) are accepted; anything else is unknown. */
export function isListPosition(position: string, ids: ListedIds = 'v1'): boolean {
  if (position === LIST_START || parseScopedId(ids, position)) return true;
  if (!position.endsWith(`_${PAST}`)) return false;
  const [version, nodeId, ...rest] = position.slice(0, -PAST.length - 1).split('_');
  return (
    version === ids &&
    rest.length === 0 &&
    nodeId !== undefined &&
    isValidNodeId(nodeId) &&
    pastNode(nodeId, ids) === position
  );
}

/** True while some entry of the node may still come after the position (of either list). */
export function nodeRemains(nodeId: string, position: string): boolean {
  return pastNode(nodeId, listOf(position)) > position;
}

/** Nodes in the order their IDs sort (the same for volume and snapshot IDs). */
export function byVolumeIdOrder(a: string, b: string): number {
  const left = volumeIdPrefix(a);
  const right = volumeIdPrefix(b);
  return left < right ? -1 : left > right ? 1 : 0;
}

/**
 * Where a pool continues after the position: from its first key (`{}`), after a key, or not at all (`undefined`:
 * the position is past all of it). `poolPrefix` is the pool identity's 16-hex prefix, as in the pool's IDs.
 */
export function continueInPool(
  position: string,
  nodeId: string,
  poolPrefix: string,
): { afterKey?: string } | undefined {
  const own = `${listOf(position)}_${nodeId}_${poolPrefix}_`;
  if (position < own) return {};
  return position.startsWith(own) ? { afterKey: position.slice(own.length) } : undefined;
}

/** The list a position is of; the start is of either (volumes, as before snapshots were paged). */
function listOf(position: string): ListedIds {
  return position.startsWith('s1_') ? 's1' : 'v1';
}

/** One page of a listing, volumes or snapshots; `unreachableNodes` and `answeredNodes` name the nodes it asked. */
export interface Page<Listed> {
  entries: Listed[];
  /** Nodes asked that did not answer (offline, or no answer in time): their entries are missing. */
  unreachableNodes: string[];
  /** Nodes whose pools answered: only for these is an entry's absence from the list a fact. */
  answeredNodes: string[];
  /** Where the next page starts (a list position); '' when this is the last page. */
  nextToken: string;
}

/**
 * Every entry of a listing, volumes or snapshots, read page by page from the start (by the controller, not in a
 * workflow). A node counts as answered only if it answered every page that asked it: one that failed part way is
 * unreachable, not judged.
 */
export async function everyPage<Listed>(pageAfter: (after: string) => Promise<Page<Listed>>): Promise<Page<Listed>> {
  const entries: Listed[] = [];
  const answered = new Set<string>();
  const unreachable = new Set<string>();
  let after = LIST_START;
  do {
    const page = await pageAfter(after);
    entries.push(...page.entries);
    for (const nodeId of page.answeredNodes) answered.add(nodeId);
    for (const nodeId of page.unreachableNodes) unreachable.add(nodeId);
    after = page.nextToken;
  } while (after);
  return {
    entries,
    unreachableNodes: [...unreachable].sort(),
    answeredNodes: [...answered].filter((nodeId) => !unreachable.has(nodeId)).sort(),
    nextToken: '',
  };
}
