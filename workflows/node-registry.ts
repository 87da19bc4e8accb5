import { condition, continueAsNew, defineSignal, setHandler, upsertMemo, workflowInfo } from '@temporalio/workflow';
import type { NodeRecord, NodeReport } from '../common/registry-types';
import { REGISTRY_MEMO_KEY } from '../common/registry-types';

/**
 * The durable registry of every node ever seen: one long-lived workflow per driver, fed by node heartbeats
 * (signalWithStart, so the first node creates it). Readers use the workflow's memo through DescribeWorkflow,
 * which the server answers itself: unlike a query it needs no worker, so a controller that just replaced a
 * killed one reads it at once. History stays short through continue-as-new, carrying the records over.
 */
export const nodeReportSignal = defineSignal<[NodeReport]>('nodeReport');

export interface NodeRegistryState {
  nodes: Record<string, NodeRecord>;
}

const HISTORY_LIMIT = 1000;

export async function nodeRegistry(state: NodeRegistryState): Promise<void> {
  const nodes: Record<string, NodeRecord> = { ...state.nodes };
  let changed = true;

  setHandler(nodeReportSignal, (report) => {
    const now = Date.now(); // workflow time: deterministic on replay
    const previous = nodes[report.nodeId];
    nodes[report.nodeId] = { ...report, firstSeen: previous?.firstSeen ?? now, lastHeartbeat: now };
    changed = true;
  });

  const historyFull = () => workflowInfo().continueAsNewSuggested || workflowInfo().historyLength > HISTORY_LIMIT;
  while (!historyFull()) {
    await condition(() => changed || historyFull());
    if (changed) {
      // One memo update per workflow task, however many reports it carried.
      upsertMemo({ [REGISTRY_MEMO_KEY]: nodes });
      changed = false;
    }
  }
  await continueAsNew<typeof nodeRegistry>({ nodes });
}
