import { patched } from '@temporalio/workflow';
import type { NodeView } from '../node-records/types';

/** The patch that renamed the activity; see docs/workflow-changes.md. */
export const REPORTED_NODES_PATCH = 'list-reported-nodes-activity';

/** The two names of the read of every reported node: the retired one is still scheduled by earlier histories. */
interface ReportedNodesReads {
  listReportedNodes(): Promise<NodeView[]>;
  readRegistry(): Promise<NodeView[]>;
}

/**
 * Every reported node, through the activity named for what it reads. Histories written before the rename scheduled
 * `readRegistry`; replaying them must schedule the same activity type, so they keep the old name.
 */
export function listReportedNodes(control: ReportedNodesReads): Promise<NodeView[]> {
  return patched(REPORTED_NODES_PATCH) ? control.listReportedNodes() : control.readRegistry();
}
