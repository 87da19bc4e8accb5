import { Client, Connection } from '@temporalio/client';
import { connectionOptions } from '../../temporal/config';
import type { ProdTemporal } from './prod-temporal';
import { SERVICES } from './server-config';

const PROBE_QUEUE = 'durable-csi-readiness-probe';
const PROBE_TIMEOUT_MS = 5_000;

/**
 * Waits until the cluster serves: the frontend answers (scope `system`), or in every namespace a workflow can be
 * started (history), its task queue described (matching) and the workflow terminated. Fails at once, with the
 * service's log, when a service process has exited.
 */
export async function waitForCluster(
  cluster: ProdTemporal,
  timeoutMs: number,
  scope: 'namespaces' | 'system',
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = 'no probe yet';
  for (;;) {
    for (const name of SERVICES) {
      const service = cluster.services[name];
      const reason = await service.exitReason();
      if (reason !== undefined)
        throw new Error(`temporal-server ${name} ${reason}; last lines of ${service.logFile}:\n${service.logTail()}`);
    }
    const problem = await probe(cluster, scope);
    if (problem === undefined) return;
    last = problem;
    if (Date.now() > deadline)
      throw new Error(
        `the Temporal cluster at ${cluster.address} did not become ready in ${timeoutMs / 1000} s: ${last}`,
      );
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
}

async function probe(cluster: ProdTemporal, scope: 'namespaces' | 'system'): Promise<string | undefined> {
  let connection: Connection | undefined;
  try {
    connection = await Connection.connect({
      ...connectionOptions(cluster.connectionConfig()),
      connectTimeout: PROBE_TIMEOUT_MS,
      interceptors: [],
    });
    const open = connection;
    const within = <T>(fn: () => Promise<T>) => open.withDeadline(Date.now() + PROBE_TIMEOUT_MS, fn);
    await within(() => open.workflowService.getSystemInfo({}));
    if (scope === 'system') return undefined;
    for (const { name } of cluster.namespaces) {
      const client = new Client({ connection: open, namespace: name });
      const workflowId = `${PROBE_QUEUE}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2)}`;
      const handle = await within(() => client.workflow.start(PROBE_QUEUE, { taskQueue: PROBE_QUEUE, workflowId }));
      // taskQueueType 1: TASK_QUEUE_TYPE_WORKFLOW (answered by matching).
      await within(() =>
        open.workflowService.describeTaskQueue({ namespace: name, taskQueue: { name: PROBE_QUEUE }, taskQueueType: 1 }),
      );
      await within(() => handle.terminate('readiness probe'));
    }
    return undefined;
  } catch (error) {
    return error instanceof Error ? error.message : String(error);
  } finally {
    await connection?.close();
  }
}
