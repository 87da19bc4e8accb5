import { ActivityFailure, proxyActivities } from '@temporalio/workflow';
import type { ControlActivities } from '../activities/control-activities';
import type {
  NodeActivities,
  NodeListPage,
  NodeTransferList,
  NodeSnapshotFilter,
  NodeSnapshotList,
  NodeSnapshotPage,
} from '../activities/node-activities';
import { LIST_START, MAX_PAGE_ENTRIES, pastNode, type ListedIds, type Page } from '../common/list-position';
import { formatGroupSnapshotId, formatSnapshotId, formatVolumeId, poolIdPrefix } from '../common/names';
import { listOptions } from './node-work';

/**
 * Listing volumes and snapshots, one page per workflow (listVolumesPage, listSnapshotsPage), from the pools
 * themselves, sorted by ID. Everything in a page is bounded (entries, nodes asked, bytes per node answer), so
 * neither a result nor a history grows with the number of volumes: 20,000 volumes in one result would exceed
 * Temporal's 2 MB payload limit. No state is kept between pages; the position (common/list-position.ts) says where
 * the next one starts.
 */
export interface ListedVolume {
  volumeId: string;
  name: string;
  nodeId: string;
  capacityBytes: number;
}

export interface ListedSnapshot {
  snapshotId: string;
  /** The CSI name it was created under (CreateSnapshotRequest.name), as its node recorded it. */
  name: string;
  sourceVolumeId: string;
  nodeId: string;
  sizeBytes: number;
  createdAt: string;
  /** A member of this group snapshot (g1_ ID): deleted with its group only. */
  groupSnapshotId?: string;
}

export interface ListVolumesPage extends Omit<Page<ListedVolume>, 'entries'> {
  volumes: ListedVolume[];
}

export interface ListSnapshotsPage extends Omit<Page<ListedSnapshot>, 'entries'> {
  snapshots: ListedSnapshot[];
}

export interface ListVolumesPageInput {
  driverName: string;
  /** A list position: '' for the first page, else the previous page's `nextToken`. */
  after: string;
  /** 0 or more than MAX_PAGE_ENTRIES (common/list-position.ts): MAX_PAGE_ENTRIES. */
  maxEntries: number;
}

export interface ListSnapshotsPageInput extends ListVolumesPageInput {
  /** Only this node is asked (whatever its record says: its silence is reported), for only these snapshots. */
  lookup?: { nodeId: string; only: NodeSnapshotFilter };
}

/** Nodes asked per page at most: a page over thousands of empty pools ends early, with a token, rather than late. */
export const MAX_PAGE_NODES = 64;

const control = proxyActivities<ControlActivities>({ startToCloseTimeout: '30s', retry: { maximumAttempts: 3 } });

export async function listVolumesPage(input: ListVolumesPageInput): Promise<ListVolumesPage> {
  const nodes = await control.readNodesAfter({ after: input.after, limit: MAX_PAGE_NODES });
  const builder = new PageBuilder(VOLUME_LIST, pageLimit(input.maxEntries), input.after || LIST_START);
  const { entries, ...page } = await fillPage(builder, nodes.nodes, nodes.more, (nodeId, after, maxEntries) => {
    const onNode = proxyActivities<NodeActivities>(listOptions(input.driverName, nodeId));
    return unlessSilent(() => onNode.listVolumePageOnNode({ after, maxEntries }));
  });
  return { volumes: entries, ...page };
}

/** A lookup by snapshot or source volume asks the one node that can hold it, which filters its own pool. */
export async function listSnapshotsPage(input: ListSnapshotsPageInput): Promise<ListSnapshotsPage> {
  const { lookup } = input;
  const nodes = lookup
    ? { nodes: [{ nodeId: lookup.nodeId, live: true }], more: false }
    : await control.readNodesAfter({ after: input.after, limit: MAX_PAGE_NODES });
  const builder = new PageBuilder(SNAPSHOT_LIST, pageLimit(input.maxEntries), input.after || LIST_START);
  const { entries, ...page } = await fillPage(builder, nodes.nodes, nodes.more, (nodeId, after, maxEntries) => {
    const onNode = proxyActivities<NodeActivities>(listOptions(input.driverName, nodeId));
    return unlessSilent(() =>
      onNode.listSnapshotPageOnNode({ after, maxEntries, ...(lookup && { only: lookup.only }) }),
    );
  });
  return { snapshots: entries, ...page };
}

type PoolTransferEntry = NodeTransferList['transfers'][number];

/** A move's staged copy or offer on a node's pool (storage/pool/transfer.ts listTransfers). */
export interface ListedTransfer extends PoolTransferEntry {
  nodeId: string;
}

export interface ListTransfersPage {
  transfers: ListedTransfer[];
  /** Nodes that did not answer (offline, silent, or a backend without a pool): their transfers are missing. */
  unreachableNodes: string[];
  /** Nodes whose pool holds more transfers than it listed. */
  truncatedNodes: string[];
  /** The position after the last node asked ('' once every node was asked), for the next page. */
  nextToken: string;
}

/**
 * The transfers of up to MAX_PAGE_NODES nodes after the position (a list position, as readNodesAfter takes it), for
 * the orphan report (issue 39): what a move that was terminated left on its nodes. Bounded as the other listings
 * are: nodes asked, entries per node. A new workflow type, which a 0.2.0 controller does not run (the report then
 * says the transfers were not checked). Not through PageBuilder: transfers have no IDs in the list order, so a node
 * answers all of its transfers at once (or says it holds more) and a page ends between nodes only.
 */
export async function listTransfersPage(input: { driverName: string; after: string }): Promise<ListTransfersPage> {
  const nodes = await control.readNodesAfter({ after: input.after, limit: MAX_PAGE_NODES });
  const page: ListTransfersPage = { transfers: [], unreachableNodes: [], truncatedNodes: [], nextToken: '' };
  for (let start = 0; start < nodes.nodes.length; start += NODES_AT_ONCE) {
    const batch = nodes.nodes.slice(start, start + NODES_AT_ONCE);
    const answers = await Promise.all(
      batch.map((node) => {
        if (!node.live) return undefined;
        const onNode = proxyActivities<NodeActivities>(listOptions(input.driverName, node.nodeId));
        return unlessSilent<NodeTransferList>(() => onNode.listTransfersOnNode());
      }),
    );
    for (const [index, node] of batch.entries()) {
      const answer = answers[index];
      if (!answer) {
        page.unreachableNodes.push(node.nodeId);
        continue;
      }
      page.transfers.push(...answer.transfers.map((transfer) => ({ ...transfer, nodeId: node.nodeId })));
      if (answer.more) page.truncatedNodes.push(node.nodeId);
    }
  }
  const last = nodes.nodes[nodes.nodes.length - 1];
  if (nodes.more && last) page.nextToken = pastNode(last.nodeId);
  return page;
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

const SNAPSHOT_LIST: ListKind<NodeSnapshotPage, ListedSnapshot> = {
  ids: 's1',
  entriesOf: (_nodeId, answer) => ({ entries: listedSnapshots(answer), more: answer.more }),
  idOf: (snapshot) => snapshot.snapshotId,
};

/** A node's snapshots as a listing shows them: IDs formed from the pool that answered. */
function listedSnapshots(answer: NodeSnapshotList): ListedSnapshot[] {
  const prefix = poolIdPrefix(answer.poolId);
  return answer.snapshots.map((snapshot) => ({
    snapshotId: formatSnapshotId({ nodeId: answer.nodeId, poolIdPrefix: prefix, key: snapshot.key }),
    name: snapshot.name,
    // A snapshot moved from another node names its source there (docs/volume-moves.md, "Snapshots").
    sourceVolumeId:
      snapshot.sourceVolumeId ??
      formatVolumeId({ nodeId: answer.nodeId, poolIdPrefix: prefix, key: snapshot.sourceKey }),
    nodeId: answer.nodeId,
    sizeBytes: snapshot.sizeBytes,
    createdAt: snapshot.createdAt,
    ...(snapshot.groupKey === undefined
      ? {}
      : {
          groupSnapshotId: formatGroupSnapshotId({
            nodeId: answer.nodeId,
            poolIdPrefix: prefix,
            key: snapshot.groupKey,
          }),
        }),
  }));
}

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
async function fillPage<Answer, Listed>(
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
async function unlessSilent<T>(ask: () => Promise<T>): Promise<T | undefined> {
  try {
    return await ask();
  } catch (error) {
    if (!(error instanceof ActivityFailure)) throw error;
    return undefined;
  }
}
