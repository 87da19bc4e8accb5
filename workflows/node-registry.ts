import { condition, continueAsNew, defineQuery, defineSignal, setHandler, workflowInfo } from '@temporalio/workflow';
import type { NodeRecord, NodeReport } from '../common/registry-types';

/**
 * The durable registry of every node ever seen: one long-lived workflow per driver, fed by node heartbeats
 * (signalWithStart, so the first node creates it) and read by the controller through a query. It keeps its
 * history short with continue-as-new, carrying the records over.
 */
export const nodeReportSignal = defineSignal<[NodeReport]>('nodeReport');
export const nodesQuery = defineQuery<NodeRecord[]>('nodes');

export interface NodeRegistryState {
  nodes: Record<string, NodeRecord>;
}

const HISTORY_LIMIT = 2000;

export async function nodeRegistry(state: NodeRegistryState): Promise<void> {
  const nodes: Record<string, NodeRecord> = { ...state.nodes };

  setHandler(nodeReportSignal, (report) => {
    const now = Date.now(); // workflow time: deterministic on replay
    const previous = nodes[report.nodeId];
    nodes[report.nodeId] = { ...report, firstSeen: previous?.firstSeen ?? now, lastHeartbeat: now };
  });
  setHandler(nodesQuery, () => Object.values(nodes).sort((a, b) => a.nodeId.localeCompare(b.nodeId)));

  await condition(() => workflowInfo().continueAsNewSuggested || workflowInfo().historyLength > HISTORY_LIMIT);
  await continueAsNew<typeof nodeRegistry>({ nodes });
}
