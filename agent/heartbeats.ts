import type { Client } from '@temporalio/client';
import type { Logger } from '../common/logger';
import { controlTaskQueue, registryWorkflowId } from '../common/names';
import type { NodeReport } from '../common/registry-types';
import { HEARTBEAT_INTERVAL_MS } from '../common/registry-types';
import type { StorageBackend } from '../storage/backend';
import { nodeReportSignal, type nodeRegistry } from '../workflows/node-registry';

/**
 * Registers the node and reports its pool every interval through signalWithStart, so the first node to
 * report creates the registry. A failed report is logged and tried again at the next tick.
 */
export function startHeartbeats(deps: {
  client: Client;
  driverName: string;
  nodeId: string;
  backend: StorageBackend;
  agentVersion: string;
  logger: Logger;
}): { stop(): void; registered(): boolean } {
  const beat = async () => {
    const status = await deps.backend.status();
    const report: NodeReport = {
      nodeId: deps.nodeId,
      poolId: status.poolId,
      backend: deps.backend.kind,
      capacityBytes: status.capacityBytes,
      availableBytes: status.availableBytes,
      volumeCount: status.volumeCount,
      agentVersion: deps.agentVersion,
    };
    await deps.client.workflow.signalWithStart<typeof nodeRegistry, [NodeReport]>('nodeRegistry', {
      workflowId: registryWorkflowId(deps.driverName),
      taskQueue: controlTaskQueue(deps.driverName),
      args: [{ nodes: {} }],
      signal: nodeReportSignal,
      signalArgs: [report],
    });
  };
  let running = true;
  let registered = false;
  const tick = () => {
    beat()
      .then(() => (registered = true))
      .catch((error: unknown) => deps.logger.warn({ err: error }, 'heartbeat failed; will retry'));
  };
  tick();
  const timer = setInterval(() => running && tick(), HEARTBEAT_INTERVAL_MS);
  return {
    registered: () => registered,
    stop: () => {
      running = false;
      clearInterval(timer);
    },
  };
}
