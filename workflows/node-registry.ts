import { condition, continueAsNew, defineSignal, setHandler, upsertMemo, workflowInfo } from '@temporalio/workflow';
import type { ForgottenNode, NodeRecord, NodeReport } from '../node-records/types';
import type { ForgetNotice } from './node-forgotten';

/**
 * DEPRECATED: the single registry workflow of releases up to 0.1 (one workflow every node signalled). Nothing
 * reads it any more: node records live apart (./node-presence.ts). It stays in the bundle only so that a run
 * started by an earlier release, still signalled by not-yet-upgraded agents during a rollout, keeps making
 * progress instead of failing its workflow tasks. Remove it one release after every agent is upgraded.
 */
const REGISTRY_MEMO_KEY = 'nodes';
const FORGOTTEN_MEMO_KEY = 'forgotten';

export const nodeReportSignal = defineSignal<[NodeReport]>('nodeReport');
/** An operator's decision that a node is gone for good; it leaves the registry, with the reason kept. */
export const forgetNodeSignal = defineSignal<[ForgetNotice]>('forgetNode');

export interface NodeRegistryState {
  nodes: Record<string, NodeRecord>;
  forgotten?: Record<string, ForgottenNode>;
}

const HISTORY_LIMIT = 1000;

export async function nodeRegistry(state: NodeRegistryState): Promise<void> {
  const nodes: Record<string, NodeRecord> = { ...state.nodes };
  const forgotten: Record<string, ForgottenNode> = { ...state.forgotten };
  let changed = true;

  setHandler(forgetNodeSignal, (notice) => {
    const record = nodes[notice.nodeId];
    if (!record) return;
    forgotten[notice.nodeId] = { ...notice, lastHeartbeat: record.lastHeartbeat };
    delete nodes[notice.nodeId];
    changed = true;
  });

  setHandler(nodeReportSignal, (report) => {
    const now = Date.now(); // workflow time: deterministic on replay
    // A forgotten node that comes back is a new registration (its pool identity tells old volumes apart).
    delete forgotten[report.nodeId];
    const previous = nodes[report.nodeId];
    nodes[report.nodeId] = { ...report, firstSeen: previous?.firstSeen ?? now, lastHeartbeat: now };
    changed = true;
  });

  const historyFull = () => workflowInfo().continueAsNewSuggested || workflowInfo().historyLength > HISTORY_LIMIT;
  while (!historyFull()) {
    await condition(() => changed || historyFull());
    if (changed) {
      // One memo update per workflow task, however many reports it carried.
      upsertMemo({ [REGISTRY_MEMO_KEY]: nodes, [FORGOTTEN_MEMO_KEY]: forgotten });
      changed = false;
    }
  }
  await continueAsNew<typeof nodeRegistry>({ nodes, forgotten });
}
