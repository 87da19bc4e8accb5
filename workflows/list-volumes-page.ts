import { ActivityFailure, proxyActivities } from '@temporalio/workflow';
import type { ControlActivities } from '../activities/control-activities';
import type { NodeActivities, NodeListPage } from '../activities/node-activities';
import { LIST_START, MAX_PAGE_ENTRIES } from '../common/list-position';
import { listOptions } from './node-activity-options';
import { PageBuilder, type ListVolumesPage } from './list-page-builder';

export type { ListVolumesPage };

/**
 * One page of every volume, sorted by volume ID, from the pools themselves. Each page is its own short workflow
 * and everything in it is bounded (entries, nodes asked, bytes per node answer), so neither a result nor a history
 * grows with the number of volumes: 20,000 volumes in one result would exceed Temporal's 2 MB payload limit. No
 * state is kept between pages; the position (common/list-position.ts) says where the next one starts.
 */
export interface ListVolumesPageInput {
  driverName: string;
  /** A list position: '' for the first page, else the previous page's `nextToken`. */
  after: string;
  /** 0 or more than {@link MAX_PAGE_ENTRIES}: {@link MAX_PAGE_ENTRIES}. */
  maxEntries: number;
}

/** Nodes asked per page at most: a page over thousands of empty pools ends early, with a token, rather than late. */
export const MAX_PAGE_NODES = 64;
/** Nodes asked at once; answers past the page's end are dropped, so this bounds the waste too. */
const NODES_AT_ONCE = 8;

const control = proxyActivities<ControlActivities>({ startToCloseTimeout: '30s', retry: { maximumAttempts: 3 } });

export async function listVolumesPage(input: ListVolumesPageInput): Promise<ListVolumesPage> {
  const limit = input.maxEntries > 0 ? Math.min(input.maxEntries, MAX_PAGE_ENTRIES) : MAX_PAGE_ENTRIES;
  const registry = await control.readNodesAfter({ after: input.after, limit: MAX_PAGE_NODES });
  const builder = new PageBuilder(limit, input.after || LIST_START);
  for (let start = 0; start < registry.nodes.length; start += NODES_AT_ONCE) {
    const batch = registry.nodes.slice(start, start + NODES_AT_ONCE);
    const { after, room } = builder;
    const answers = await Promise.all(
      batch.map((node) => (node.live ? askNode(input.driverName, node.nodeId, after, room) : undefined)),
    );
    for (const [index, node] of batch.entries()) {
      const lastNode = !registry.more && start + index === registry.nodes.length - 1;
      const full = builder.add(node.nodeId, answers[index], lastNode);
      if (full) return full;
    }
  }
  return builder.finish(registry.more);
}

/** Undefined when the node did not pick the work up or failed: its volumes are missing from this page. */
async function askNode(
  driverName: string,
  nodeId: string,
  after: string,
  maxEntries: number,
): Promise<NodeListPage | undefined> {
  const onNode = proxyActivities<NodeActivities>(listOptions(driverName, nodeId));
  try {
    return await onNode.listVolumePageOnNode({ after, maxEntries });
  } catch (error) {
    if (!(error instanceof ActivityFailure)) throw error;
    return undefined;
  }
}
