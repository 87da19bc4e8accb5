/**
 * A probe's answer, reused for `ttlMs`: kubelet, a Service mesh and a scraper each polling /readyz must not turn
 * into one Temporal call apiece (at thousands of Pods that is real load on the control plane). Calls that arrive
 * while a check runs share it, so a slow Temporal never piles up checks either.
 */
export function cachedCheck<T>(check: () => Promise<T>, ttlMs: number, now: () => number = Date.now): () => Promise<T> {
  let last: { at: number; answer: T } | undefined;
  let running: Promise<T> | undefined;
  return () => {
    if (last && now() - last.at < ttlMs) return Promise.resolve(last.answer);
    running ??= check()
      .then((answer) => {
        last = { at: now(), answer };
        return answer;
      })
      .finally(() => {
        running = undefined;
      });
    return running;
  };
}
