import { proxyActivities } from '@temporalio/workflow';
import type { ControlActivities } from '../activities/control-activities';
import type { NodeActivities, NodeSnapshotFilter, NodeSnapshotPage } from '../activities/node-activities';
import { LIST_START } from '../common/list-position';
import { PageBuilder, fillPage, pageLimit, unlessSilent, type ListKind, type Page } from './list-page-builder';
import { listedSnapshots, type ListedSnapshot } from './list-snapshots';
import { MAX_PAGE_NODES } from './list-volumes-page';
import { listOptions } from './node-activity-options';

/**
 * One page of every snapshot, sorted by snapshot ID, from the pools themselves, as listVolumesPage pages volumes:
 * each page a short workflow, bounded in entries, nodes asked and bytes per node answer, no state kept between pages
 * (the position, common/list-position.ts, says where the next one starts). A lookup by snapshot or source volume
 * asks the one node that can hold it, which filters its own pool.
 */
export interface ListSnapshotsPageInput {
  driverName: string;
  /** A list position of snapshots: '' for the first page, else the previous page's `nextToken`. */
  after: string;
  /** 0 or more than MAX_PAGE_ENTRIES (common/list-position.ts): MAX_PAGE_ENTRIES. */
  maxEntries: number;
  /** Only this node is asked (whatever its record says: its silence is reported), for only these snapshots. */
  lookup?: { nodeId: string; only: NodeSnapshotFilter };
}

export interface ListSnapshotsPage extends Omit<Page<ListedSnapshot>, 'entries'> {
  snapshots: ListedSnapshot[];
}

const SNAPSHOT_LIST: ListKind<NodeSnapshotPage, ListedSnapshot> = {
  ids: 's1',
  entriesOf: (_nodeId, answer) => ({ entries: listedSnapshots(answer), more: answer.more }),
  idOf: (snapshot) => snapshot.snapshotId,
};

const control = proxyActivities<ControlActivities>({ startToCloseTimeout: '30s', retry: { maximumAttempts: 3 } });

export async function listSnapshotsPage(input: ListSnapshotsPageInput): Promise<ListSnapshotsPage> {
  const limit = pageLimit(input.maxEntries);
  const { lookup } = input;
  const registry = lookup
    ? { nodes: [{ nodeId: lookup.nodeId, live: true }], more: false }
    : await control.readNodesAfter({ after: input.after, limit: MAX_PAGE_NODES });
  const builder = new PageBuilder(SNAPSHOT_LIST, limit, input.after || LIST_START);
  const { entries, ...page } = await fillPage(builder, registry.nodes, registry.more, (nodeId, after, maxEntries) => {
    const onNode = proxyActivities<NodeActivities>(listOptions(input.driverName, nodeId));
    return unlessSilent(() =>
      onNode.listSnapshotPageOnNode({ after, maxEntries, ...(lookup && { only: lookup.only }) }),
    );
  });
  return { snapshots: entries, ...page };
}
