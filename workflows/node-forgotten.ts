import { CancellationScope, condition, defineSignal, setHandler } from '@temporalio/workflow';

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

/** Runs work against a node until it finishes or the node is forgotten, in which case the work is cancelled. */
export function listenForForget(): <T>(work: () => Promise<T>) => Promise<UntilForgotten<T>> {
  let notice: ForgetNotice | undefined;
  setHandler(nodeForgottenSignal, (received) => {
    notice = received;
  });
  return async <T>(work: () => Promise<T>): Promise<UntilForgotten<T>> => {
    if (notice) return { forgotten: true, notice };
    const scope = new CancellationScope();
    const running = scope.run(work);
    running.catch(() => undefined); // once cancelled, its failure is expected and ignored
    const winner = await Promise.race([
      running.then((value) => ({ forgotten: false as const, value })),
      condition(() => notice !== undefined).then(() => ({ forgotten: true as const, notice: notice! })),
    ]);
    if (winner.forgotten) scope.cancel();
    return winner;
  };
}
