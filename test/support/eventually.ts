/**
 * The one polling helper of the tests: calls `check` every `intervalMs` until it yields a value (anything but
 * `undefined` or `false`, so a count of 0 or an empty string is an answer) and returns that value. A throw counts
 * as "not yet" (eventually consistent reads, processes coming and going), so a failure names `what`, how long it
 * waited and what the check last said or threw.
 */
export async function eventually<T>(
  what: string,
  check: () => Promise<T | undefined | false> | T | undefined | false,
  timeoutMs = 60_000,
  intervalMs = 250,
): Promise<T> {
  const started = Date.now();
  let last = 'never checked';
  for (;;) {
    try {
      const value = await check();
      if (value !== undefined && value !== false) return value;
      last = String(value);
    } catch (error) {
      last = `threw ${error instanceof Error ? error.message : String(error)}`;
    }
    const waited = Date.now() - started;
    if (waited > timeoutMs) throw new Error(`${what}: not within ${waited} ms (last: ${last})`);
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}
