import { missingSearchAttributes } from '../temporal/check-search-attributes';

const PROBE_TIMEOUT_MS = 2_000;
const PROBE_INTERVAL_MS = 250;

/** One readiness check. Search attributes are registered asynchronously on first start, so they are checked too. */
export async function probeServer(address: string, namespace: string): Promise<string | undefined> {
  // Loaded here: a process that only supervises the server (durable-csi dev) probes it from a child instead.
  const { Connection } = await import('@temporalio/client');
  // No retry interceptors: each probe should fail fast and let the loop decide.
  const connection = Connection.lazy({ address, connectTimeout: PROBE_TIMEOUT_MS, interceptors: [] });
  const within = <T>(fn: () => Promise<T>): Promise<T> => connection.withDeadline(Date.now() + PROBE_TIMEOUT_MS, fn);
  try {
    await connection.ensureConnected();
    await within(() => connection.workflowService.describeNamespace({ namespace }));
    const missing = await within(() => missingSearchAttributes(connection, namespace));
    return missing.length === 0 ? undefined : `search attributes not registered yet: ${missing.join(', ')}`;
  } catch (err) {
    return err instanceof Error ? err.message : String(err);
  } finally {
    await connection.close();
  }
}

/** Probes every 250 ms until ready (undefined) or the deadline (the last probe's answer). */
export async function probeUntilReady(
  address: string,
  namespace: string,
  deadline: number,
): Promise<string | undefined> {
  for (;;) {
    const outcome = await probeServer(address, namespace);
    if (outcome === undefined || Date.now() >= deadline) return outcome;
    await new Promise((resolve) => setTimeout(resolve, PROBE_INTERVAL_MS));
  }
}

/**
 * As a process, `node server-probe.js <address> <namespace> <deadline ms since the epoch>`: probes until ready (exit
 * 0) or the deadline (the last answer on stdout, exit 1). The dev stack's supervisor runs it so as not to hold the
 * Temporal client (gRPC and the API's protobuf definitions, about 30 MB) for the life of the stack.
 */
if (require.main === module) {
  const [address = '', namespace = '', deadline = '0'] = process.argv.slice(2);
  // Tethered: gone when the process that started us is.
  process.channel?.unref();
  process.once('disconnect', () => process.exit(1));
  void probeUntilReady(address, namespace, Number(deadline)).then((outcome) => {
    if (outcome !== undefined) process.stdout.write(outcome);
    process.exit(outcome === undefined ? 0 : 1);
  });
}
