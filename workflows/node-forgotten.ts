import { condition, defineSignal, patched, setHandler } from '@temporalio/workflow';
import { startCancellable } from './cancellable-work';

/**
 * The operator's decision that a node is gone for good (`durable-csi nodes forget`). Operations waiting on
 * that node stop waiting and end with this recorded outcome; nothing else ever gives up on a node.
 */
export interface ForgetNotice {
  nodeId: string;
  reason: string;
  /** ISO 8601, when the operator decided. */
  at: string;
}

export const nodeForgottenSignal = defineSignal<[ForgetNotice]>('nodeForgotten');

export type UntilForgotten<T> = { forgotten: false; value: T } | { forgotten: true; notice: ForgetNotice };

/**
 * Earlier builds let any notice end any node's work: a forget of node A (or a late one, about a node the create had
 * already left) skipped node B's completion after B may have allocated. Their histories keep that path.
 */
export const NOTICE_PER_NODE_PATCH = 'forget-notice-per-node';

/**
 * Runs work against a node until it finishes or that node is forgotten, in which case the work is cancelled.
 * Notices are kept for the whole workflow (a create visits several nodes); each ends only work on the node it names.
 */
export function listenForForget(): <T>(nodeId: string, work: () => Promise<T>) => Promise<UntilForgotten<T>> {
  const notices: ForgetNotice[] = [];
  setHandler(nodeForgottenSignal, (received) => {
    notices.push(received);
  });
  return async <T>(nodeId: string, work: () => Promise<T>): Promise<UntilForgotten<T>> => {
    let judged = 0;
    /** The first notice not judged yet that ends this work; patched() only where the two builds differ. */
    const ending = (): ForgetNotice | undefined => {
      while (judged < notices.length) {
        const notice = notices[judged++]!;
        if (notice.nodeId === nodeId) return notice;
        if (!patched(NOTICE_PER_NODE_PATCH)) return notices[notices.length - 1]; // as earlier builds: the latest
      }
      return undefined;
    };
    const early = ending();
    if (early) return { forgotten: true, notice: early };
    const { finished, cancel } = startCancellable(work, (value) => ({ forgotten: false as const, value }));
    for (;;) {
      const winner = await Promise.race([finished, condition(() => judged < notices.length).then(() => undefined)]);
      if (winner) return winner;
      const notice = ending();
      if (notice) {
        cancel();
        return { forgotten: true, notice };
      }
    }
  };
}
