import fs from 'node:fs';

/**
 * Follows a Temporal API key file: a rotated key (a new Secret version, which kubelet swaps in by renaming a
 * symbolic link, so no inotify event reaches a watcher of the old file) is read by polling and handed to `apply`
 * (NativeConnection.setApiKey updates the live connection: no restart). A file that is missing or empty for a
 * moment (mid-rotation) keeps the current key. Returns the stop function.
 */
export function followApiKeyFile(
  file: string,
  current: string,
  apply: (key: string) => Promise<void>,
  onError: (message: string) => void,
  intervalMs = 10_000,
): () => void {
  let key = current;
  let busy = false;
  const timer = setInterval(() => {
    if (busy) return;
    let next: string;
    try {
      next = fs.readFileSync(file, 'utf8').trim();
    } catch (error) {
      onError(`cannot read the API key file ${file}: ${(error as Error).message}; keeping the current key`);
      return;
    }
    if (next === '' || next === key) return;
    busy = true;
    apply(next)
      .then(() => {
        key = next;
      })
      .catch((error: unknown) => onError(`cannot switch to the new API key from ${file}: ${String(error)}`))
      .finally(() => {
        busy = false;
      });
  }, intervalMs);
  timer.unref();
  return () => clearInterval(timer);
}
