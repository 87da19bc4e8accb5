import { ActivityFailure } from '@temporalio/common';
import type { NodeListPage } from '../activities/node-activities';
import { MAX_PAGE_ENTRIES, pastNode, type ListedIds } from '../common/list-position';
import { formatVolumeId, poolIdPrefix } from '../common/volume-id';
import type { ListedVolume, ListVolumesResult } from './list-volumes';

/** `unreachableNodes` and `answeredNodes` name only the nodes this page asked. */
export interface ListVolumesPage extends ListVolumesResult {
  /** Where the next page starts (a list position); '' when this is the last page. */
  nextToken: string;
}

/** One page of a listing, volumes or snapshots; `unreachableNodes` and `answeredNodes` name the nodes it asked. */
export interface Page<Listed> {
  entries: Listed[];
  unreachableNodes: string[];
  answeredNodes: string[];
  /** Where the next page starts (a list position); '' when this is the last page. */
  nextToken: string;
}

/** What a listing pages through: its IDs, and how a node's answer becomes entries. */
export interface ListKind<Answer, Listed> {
  ids: ListedIds;
  /** The node's answer as entries in ID order, and whether its pool holds more after them. */
  entriesOf(nodeId: string, answer: Answer): { entries: Listed[]; more: boolean };
  idOf(entry: Listed): string;
}

export const VOLUME_LIST: ListKind<NodeListPage, ListedVolume> = {
  ids: 'v1',
  entriesOf: (nodeId, answer) => ({
    entries: answer.volumes.map((volume) => ({
      volumeId: formatVolumeId({ nodeId, poolIdPrefix: poolIdPrefix(answer.poolId), key: volume.key }),
      name: volume.name,
      nodeId,
      capacityBytes: volume.capacityBytes,
    })),
    more: answer.more,
  }),
  idOf: (volume) => volume.volumeId,
};

/** Entries a page may hold: what the caller asked, 0 or too many meaning {@link MAX_PAGE_ENTRIES}. */
export function pageLimit(maxEntries: number): number {
  return maxEntries > 0 ? Math.min(maxEntries, MAX_PAGE_ENTRIES) : MAX_PAGE_ENTRIES;
}

/**
 * Puts the nodes' answers, taken in ID order of the nodes, into one page of at most `limit` entries, and says where
 * the next page starts. Pure, so the page's edges (full inside a node, full at a node's end, a node that did not
 * answer, the node budget used up) are tested without a cluster.
 */
export class PageBuilder<Answer, Listed> {
  private readonly page: Page<Listed> = { entries: [], unreachableNodes: [], answeredNodes: [], nextToken: '' };

  constructor(
    private readonly kind: ListKind<Answer, Listed>,
    private readonly limit: number,
    private position: string,
  ) {}

  /** Where the nodes not added yet continue from. */
  get after(): string {
    return this.position;
  }

  get room(): number {
    return this.limit - this.page.entries.length;
  }

  /** One node's answer (undefined: it did not answer); the finished page once it is full. */
  add(nodeId: string, answer: Answer | undefined, lastNode: boolean): Page<Listed> | undefined {
    if (!answer) {
      this.page.unreachableNodes.push(nodeId);
    } else {
      this.page.answeredNodes.push(nodeId);
      const room = this.room;
      const { entries, more } = this.kind.entriesOf(nodeId, answer);
      this.page.entries.push(...entries.slice(0, room));
      if (entries.length > room || more) {
        // Full inside this node (or its answer hit its byte bound): the next page continues after its last entry.
        const last = this.page.entries[this.page.entries.length - 1];
        return { ...this.page, nextToken: last ? this.kind.idOf(last) : this.position };
      }
    }
    this.position = pastNode(nodeId, this.kind.ids);
    if (this.room === 0) return this.finish(!lastNode);
    return undefined;
  }

  /** `moreNodes`: nodes after the last one added may hold entries, so the listing goes on from here. */
  finish(moreNodes: boolean): Page<Listed> {
    return { ...this.page, nextToken: moreNodes ? this.position : '' };
  }
}

/** Nodes asked at once; answers past the page's end are dropped, so this bounds the waste too. */
const NODES_AT_ONCE = 8;

/**
 * Fills the page from `nodes` (in ID order; `moreNodes` when others follow them), asking the live ones
 * {@link NODES_AT_ONCE} at a time from where the page stands, and ends as soon as it is full.
 */
export async function fillPage<Answer, Listed>(
  builder: PageBuilder<Answer, Listed>,
  nodes: { nodeId: string; live: boolean }[],
  moreNodes: boolean,
  ask: (nodeId: string, after: string, room: number) => Promise<Answer | undefined>,
): Promise<Page<Listed>> {
  for (let start = 0; start < nodes.length; start += NODES_AT_ONCE) {
    const batch = nodes.slice(start, start + NODES_AT_ONCE);
    const { after, room } = builder;
    const answers = await Promise.all(batch.map((node) => (node.live ? ask(node.nodeId, after, room) : undefined)));
    for (const [index, node] of batch.entries()) {
      const lastNode = !moreNodes && start + index === nodes.length - 1;
      const full = builder.add(node.nodeId, answers[index], lastNode);
      if (full) return full;
    }
  }
  return builder.finish(moreNodes);
}

/** Undefined when the node did not pick the work up or failed: its entries are missing from this page. */
export async function unlessSilent<T>(ask: () => Promise<T>): Promise<T | undefined> {
  try {
    return await ask();
  } catch (error) {
    if (!(error instanceof ActivityFailure)) throw error;
    return undefined;
  }
}
