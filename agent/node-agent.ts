import { Client } from '@temporalio/client';
import { Worker } from '@temporalio/worker';
import { createNodeActivities } from '../activities/node-activities';
import { createPresenceActivities } from '../activities/presence-activities';
import { createLogger } from '../common/logger';
import { nodeTaskQueue } from '../common/names';
import type { TemporalConfig } from '../common/temporal-config';
import { connectTemporal } from '../common/temporal-connection';
import { driverVersion } from '../common/version';
import { createIdentityService } from '../csi/identity-service';
import { createNodeService } from '../csi/node-service';
import { serveCsi } from '../csi/server';
import { createBackend, type BackendConfig } from './create-backend';
import { armedFailpoints, withFailpoints } from './failpoints';
import { startPresence } from './presence';
import { installTemporalRuntime } from './runtime';
import { applyAgentHeapTuning } from './process-tuning';
import { onShutdownSignal } from './shutdown';
import { serveHealth } from './health-endpoint';
import { startPluginRegistration, type PluginRegistrationOptions } from './plugin-registration';
import { nodeWorkerTuning } from './worker-options';
import { registerNodeMetrics } from '../metrics/node-metrics';
import { createProcessMetrics, serveMetrics } from '../metrics/registry';

export interface NodeAgentConfig {
  endpoint: string;
  driverName: string;
  nodeId: string;
  backend: BackendConfig;
  temporal: TemporalConfig;
  /** host:port for our Prometheus metrics; off when empty. */
  metricsAddress?: string;
  /** host:port for the Temporal SDK's own Prometheus metrics; off when empty. */
  sdkMetricsAddress?: string;
  /** host:port for the Pod's probes (/healthz, /readyz); off when empty. */
  healthAddress?: string;
  /** Register with kubelet (plugins_registry) once CSI answers; off when absent. */
  registration?: Pick<PluginRegistrationOptions, 'registrationDir' | 'kubeletEndpoint'>;
}

/**
 * The node agent: CSI Identity + Node for kubelet, and a worker that polls only this node's task queue and
 * runs the storage activities. The pool is opened (journal reconciled) before any work is taken.
 */
export async function runNodeAgent(config: NodeAgentConfig): Promise<{ stop(): Promise<void> }> {
  applyAgentHeapTuning();
  installTemporalRuntime(config.sdkMetricsAddress);
  const logger = createLogger('node').child({ node: config.nodeId });
  const failpoints = armedFailpoints();
  if (failpoints.size > 0)
    logger.warn({ failpoints: [...failpoints] }, 'failpoints armed: this agent will kill itself');
  const backend = withFailpoints(createBackend(config.backend), failpoints);
  const report = await backend.open();
  logger.info({ poolId: report.poolId, created: report.created, reconciled: report.reconciled }, 'pool open');
  if (report.strays.length > 0) logger.warn({ strays: report.strays }, 'pool holds entries no record explains');
  if (report.repaired.length > 0)
    logger.warn({ repaired: report.repaired }, 'staged volumes and loop devices repaired at open');

  const connection = await connectTemporal(config.temporal);
  const client = new Client({ connection, namespace: config.temporal.namespace });
  const presence = startPresence({ client, driverName: config.driverName, nodeId: config.nodeId, logger });
  const worker = await Worker.create({
    connection,
    namespace: config.temporal.namespace,
    taskQueue: nodeTaskQueue(config.driverName, config.nodeId),
    activities: {
      ...createNodeActivities({ backend, poolId: report.poolId, nodeId: config.nodeId }),
      ...createPresenceActivities({
        nodeId: config.nodeId,
        backend,
        agentVersion: driverVersion(),
        leaving: presence.leaving,
        onRecordLost: () => presence.recordLost(),
      }),
    },
    shutdownGraceTime: '5s',
    ...nodeWorkerTuning(),
  });
  const workerDone = worker.run();

  // Liveness (csi/identity-service.ts): the worker runs and the record was started once; never Temporal's health.
  const live = async () => worker.getState() === 'RUNNING' && presence.registered();
  const identity = createIdentityService({ driverName: config.driverName, version: driverVersion(), live });
  const metrics = createProcessMetrics('node');
  registerNodeMetrics(metrics.registry, backend, config.nodeId);
  const stopMetrics = config.metricsAddress
    ? await serveMetrics(config.metricsAddress, metrics.registry, logger)
    : undefined;
  const server = await serveCsi(
    config.endpoint,
    { identity, node: createNodeService({ nodeId: config.nodeId, poolId: report.poolId, backend }) },
    logger,
    metrics,
  );
  // kubelet's side (docs/kubernetes.md, "Registration"): registration once CSI answers; ready = registered.
  const { driverName, endpoint: csiEndpoint } = config;
  const registration =
    config.registration && (await startPluginRegistration({ ...config.registration, driverName, csiEndpoint, logger }));
  const ready = async () => (!registration || registration.registered() ? undefined : 'kubelet has not registered us');
  const stopHealth = config.healthAddress
    ? await serveHealth(config.healthAddress, { live, ready }, logger)
    : undefined;
  logger.info({ driver: config.driverName, backend: backend.kind }, 'node agent ready');

  let stopped: Promise<void> | undefined;
  const stop = () =>
    (stopped ??= (async () => {
      // First: the held presence activity returns "leaving", so the record turns offline now, not in 30 s.
      presence.stop();
      await registration?.stop();
      await server.close();
      await stopHealth?.();
      await stopMetrics?.();
      worker.shutdown();
      await workerDone;
      await backend.close();
      await connection.close();
    })());
  onShutdownSignal(logger, stop);
  workerDone.catch((error: unknown) => {
    logger.fatal({ err: error }, 'activity worker stopped');
    process.exit(1);
  });
  return { stop };
}
