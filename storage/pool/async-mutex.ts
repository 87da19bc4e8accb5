/** Runs tasks one at a time, in call order; a failed task does not stop the ones queued behind it. */
export class AsyncMutex {
  private tail: Promise<void> = Promise.resolve();
  private pending = 0;

  /** True while a task runs or waits. */
  get busy(): boolean {
    return this.pending > 0;
  }

  run<T>(task: () => Promise<T>): Promise<T> {
    this.pending++;
    const result = this.tail.then(task);
    this.tail = result.then(
      () => void this.pending--,
      () => void this.pending--,
    );
    return result;
  }
}
