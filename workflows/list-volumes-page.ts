import { proxyActivities } from '@temporalio/workflow';
import type { ControlActivities } from '../activities/control-activities';
import type { NodeActivities } from '../activities/node-activities';
import { LIST_START } from '../common/list-position';
import { listOptions } from './node-activity-options';
import { PageBuilder, VOLUME_LIST, fillPage, pageLimit, unlessSilent, type ListVolumesPage } from './list-page-builder';

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
  /** 0 or more than MAX_PAGE_ENTRIES (common/list-position.ts): MAX_PAGE_ENTRIES. */
  maxEntries: number;
}

/** Nodes asked per page at most: a page over thousands of empty pools ends early, with a token, rather than late. */
export const MAX_PAGE_NODES = 64;

const control = proxyActivities<ControlActivities>({ startToCloseTimeout: '30s', retry: { maximumAttempts: 3 } });

export async function listVolumesPage(input: ListVolumesPageInput): Promise<ListVolumesPage> {
  const limit = pageLimit(input.maxEntries);
  const registry = await control.readNodesAfter({ after: input.after, limit: MAX_PAGE_NODES });
  const builder = new PageBuilder(VOLUME_LIST, limit, input.after || LIST_START);
  const { entries, ...page } = await fillPage(builder, registry.nodes, registry.more, (nodeId, after, maxEntries) => {
    const onNode = proxyActivities<NodeActivities>(listOptions(input.driverName, nodeId));
    return unlessSilent(() => onNode.listVolumePageOnNode({ after, maxEntries }));
  });
  return { volumes: entries, ...page };
}
