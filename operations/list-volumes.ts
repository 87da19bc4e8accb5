import type { Client } from '@temporalio/client';
import { LIST_START, MAX_PAGE_ENTRIES } from '../common/list-position';
import { controlTaskQueue, listWorkflowId, oneOffTag } from '../common/names';
import type * as workflows from '../workflows';
import type { ListVolumesPage, Page } from '../workflows/listing';

/** Every volume, from every page: `answeredNodes` only the nodes that answered every page that asked them. */
export type ListVolumesResult = Omit<ListVolumesPage, 'nextToken'>;

/** One page of the volumes after `after` (a list position), from the pools; one short workflow. */
export async function listVolumePage(
  client: Client,
  driverName: string,
  after: string,
  maxEntries: number,
): Promise<ListVolumesPage> {
  return client.workflow.execute<typeof workflows.listVolumesPage>('listVolumesPage', {
    workflowId: listWorkflowId(driverName, oneOffTag()),
    taskQueue: controlTaskQueue(driverName),
    args: [{ driverName, after, maxEntries }],
    workflowExecutionTimeout: '1m',
  });
}

/**
 * Every volume, page after page (the orphan report, operator views). The pages are read one after another, so a
 * volume created or deleted meanwhile may or may not appear, as with any ListVolumes paging.
 */
export async function listEveryVolume(client: Client, driverName: string): Promise<ListVolumesResult> {
  const every = await everyPage(async (after) => {
    const { volumes, ...page } = await listVolumePage(client, driverName, after, MAX_PAGE_ENTRIES);
    return { entries: volumes, ...page };
  });
  return { volumes: every.entries, unreachableNodes: every.unreachableNodes, answeredNodes: every.answeredNodes };
}

/**
 * Every entry of a listing, volumes or snapshots, read page by page from the start. A node counts as answered
 * only if it answered every page that asked it: one that failed part way is unreachable, not judged.
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
