import { setCurrentDetails, setHandler, upsertSearchAttributes } from '@temporalio/workflow';
import { nodeLivenessSignal, PhaseKey, WaitingSinceKey } from '../common/names';

/** What an operation is doing on a node, for the details line: "deleting", "allocating", ... */
export interface NodeWork {
  nodeId: string;
  doing: string;
}

export interface LivenessFollower {
  /**
   * The operation now waits on this node; `live` is the best knowledge at this moment (unknown: undefined).
   * `shown`: the workflow was started with the matching phase already (no upsert needed).
   */
  waitOn(work: NodeWork, live: boolean | undefined, at: Date, shown?: boolean): void;
  /** The operation no longer waits on any node. */
  stop(): void;
}

/** Registers the liveness handler; phase changes only while the operation waits on the notice's node. */
export function followNodeLiveness(): LivenessFollower {
  let current: NodeWork | undefined;
  let shownLive: boolean | undefined;
  let latest = '';
  const show = (work: NodeWork, live: boolean | undefined, at: Date, shown = false) => {
    shownLive = live;
    if (live === false || live === undefined) {
      if (!shown)
        upsertSearchAttributes([
          { key: PhaseKey, value: 'waiting-for-node' },
          { key: WaitingSinceKey, value: at },
        ]);
      const why = live === false ? 'offline' : 'unknown to this driver: no agent has registered it';
      setCurrentDetails(`${work.doing} waits for node ${work.nodeId} (${why}) since ${at.toISOString()}`);
    } else {
      if (!shown) upsertSearchAttributes([{ key: PhaseKey, value: 'running' }]);
      setCurrentDetails(`${work.doing} on node ${work.nodeId}`);
    }
  };
  setHandler(nodeLivenessSignal, (notice) => {
    if (notice.at < latest) return; // announcements may arrive out of order; ISO strings sort by time
    latest = notice.at;
    if (!current || notice.nodeId !== current.nodeId || notice.live === shownLive) return;
    show(current, notice.live, new Date(notice.at));
  });
  return {
    waitOn(work, live, at, shown) {
      current = work;
      show(work, live, at, shown);
    },
    stop() {
      current = undefined;
    },
  };
}
