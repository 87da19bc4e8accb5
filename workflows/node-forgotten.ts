import { condition, setHandler } from '@temporalio/workflow';
import { nodeForgottenSignal, type ForgetNotice } from '../common/names';
import { startCancellable } from './cancellable-work';

export type UntilForgotten<T> = { forgotten: false; value: T } | { forgotten: true; notice: ForgetNotice };

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
    /** The first notice not judged yet that names this work's node: a notice about another node ends nothing. */
    const ending = (): ForgetNotice | undefined => {
      while (judged < notices.length) {
        const notice = notices[judged++]!;
        if (notice.nodeId === nodeId) return notice;
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
