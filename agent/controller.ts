import { Client } from '@temporalio/client';
import { Worker, type NativeConnection } from '@temporalio/worker';
import fs from 'node:fs';
import { createControlActivities, type ControlDeps } from '../activities/control-activities';
import { createLogger, type Logger } from '../common/logger';
import { controlTaskQueue } from '../common/names';
import type { TemporalConfig } from '../temporal/config';
import { connectTemporal } from '../temporal/connection';
import { driverVersion } from '../common/version';
import { createControllerService } from '../csi/controller-service';
import { createIdentityService } from '../csi/identity-service';
import { serveCsi } from '../csi/server';
import { VolumeOperations } from '../operations/volume-operations';
import { SnapshotOperations } from '../operations/snapshot-operations';
import { missingSearchAttributes } from '../temporal/check-search-attributes';
import { searchAttributeCreateCommands } from '../temporal/register-commands';
import { WORKFLOW_BUNDLE_PATH, WORKFLOWS_PATH } from './bundle-workflows';
import { installTemporalRuntime } from './runtime';
import { applyAgentHeapTuning } from './process-tuning';
import { controllerWorkerTuning } from './worker-options';
import { onShutdownSignal } from './shutdown';
import { serveHealth } from './health-endpoint';
import { registerControllerMetrics } from '../metrics/controller-metrics';
import { createProcessMetrics, serveMetrics } from '../metrics/registry';
import type { NodeDeletedPolicy } from '../kubernetes/node-deleted-policy';
import { cachedCheck } from '../common/cached-check';

export interface ControllerConfig {
  endpoint: string;
  driverName: string;
  temporal: TemporalConfig;
  callWaitMs: number;
  maxVolumeBytes: number;
  /** host:port for our Prometheus metrics; off when empty. */
  metricsAddress?: string;
  /** host:port for the Temporal SDK's own Prometheus metrics; off when empty. */
  sdkMetricsAddress?: string;
  /** host:port for the Pod's liveness probe (/healthz); off when empty. */
  healthAddress?: string;
  /** Watch Kubernetes (KUBECONFIG or the in-cluster ServiceAccount): Node-deleted policy, orphan metric. */
  kubernetes?: boolean;
  nodeDeleted?: NodeDeletedPolicy;
  /** --snapshots: serve the snapshot calls and advertise their capabilities (docs/snapshots.md). */
  snapshots?: boolean;
}

export interface RunningController {
  stop(): Promise<void>;
}

/**
 * The controller: CSI Identity + Controller for external-provisioner, a Temporal client, and the worker that
 * runs every workflow. It keeps nothing in memory that it needs after a restart.
 */
export async function runController(config: ControllerConfig): Promise<RunningController> {
  applyAgentHeapTuning();
  installTemporalRuntime(config.sdkMetricsAddress);
  const logger = createLogger('controller');
  const connection = await connectTemporal(config.temporal, (message) => logger.error(message));
  const client = new Client({ connection, namespace: config.temporal.namespace });
  await assertSearchAttributes(connection, config);

  // Filled in once Kubernetes is watched (below): the worker starts first, and Events are only reports.
  const writtenOffEvents: ControlDeps['writtenOffEvents'] = {};
  const worker = await createControlWorker(connection, client, config, writtenOffEvents);
  const workerDone = worker.run();

  const services = csiServices(client, worker, config);
  const metrics = createProcessMetrics('controller');
  registerControllerMetrics(metrics.registry, client, config.driverName, logger, services.readiness);
  const kubernetes = await startKubernetes(config, client, metrics.registry, logger);
  writtenOffEvents.report = kubernetes?.reportWrittenOff;
  const stopMetrics = config.metricsAddress
    ? await serveMetrics(config.metricsAddress, metrics.registry, logger, services.readiness)
    : undefined;
  const server = await serveCsi(config.endpoint, services.csi, logger, metrics);
  const stopHealth = config.healthAddress
    ? await serveHealth(config.healthAddress, { live: services.live }, logger)
    : undefined;
  logger.info({ driver: config.driverName, temporal: config.temporal.address }, 'controller ready');

  let stopped: Promise<void> | undefined;
  const stop = () =>
    (stopped ??= (async () => {
      await server.close();
      await stopHealth?.();
      await stopMetrics?.();
      await kubernetes?.stop();
      worker.shutdown();
      await workerDone;
      await connection.close();
    })());
  onShutdownSignal(logger, stop);
  workerDone.catch((error: unknown) => {
    logger.fatal({ err: error }, 'workflow worker stopped');
    process.exit(1);
  });
  return { stop };
}

/** A namespace without the driver's search attributes is refused, with the commands that register them. */
async function assertSearchAttributes(connection: NativeConnection, config: ControllerConfig): Promise<void> {
  const missing = await missingSearchAttributes(connection, config.temporal.namespace);
  if (missing.length > 0) {
    const commands = searchAttributeCreateCommands(config.temporal, missing).join('\n  ');
    throw new Error(
      `namespace "${config.temporal.namespace}" lacks the search attributes ${missing.join(', ')}; register them:\n  ${commands}`,
    );
  }
}

/** The worker of the control queue: every workflow, and the controller's own activities. */
function createControlWorker(
  connection: NativeConnection,
  client: Client,
  config: ControllerConfig,
  writtenOffEvents: ControlDeps['writtenOffEvents'],
): Promise<Worker> {
  return Worker.create({
    connection,
    namespace: config.temporal.namespace,
    taskQueue: controlTaskQueue(config.driverName),
    ...(fs.existsSync(WORKFLOW_BUNDLE_PATH)
      ? { workflowBundle: { codePath: WORKFLOW_BUNDLE_PATH } }
      : { workflowsPath: WORKFLOWS_PATH }),
    activities: createControlActivities({ client, driverName: config.driverName, writtenOffEvents }),
    shutdownGraceTime: '5s',
    ...controllerWorkerTuning(),
  });
}

/** CSI Identity and Controller, and the liveness and readiness the probes read. */
function csiServices(client: Client, worker: Worker, config: ControllerConfig) {
  // Eager start: the client shares the worker's connection and the worker polls the control queue.
  const operations = new VolumeOperations(client, config.driverName, { eagerStart: true });
  const identity = createIdentityService({
    driverName: config.driverName,
    version: driverVersion(),
    // Initialised (csi/identity-service.ts); whether Temporal answers now is /readyz below.
    ready: async () => worker.getState() === 'RUNNING',
  });
  // The Pod's liveness (/healthz): the worker runs; Temporal's health is readiness (/readyz on the metrics port).
  const live = async () => worker.getState() === 'RUNNING';
  // Cached: every probe (kubelet's, a scraper's) would otherwise be a Temporal call.
  const readiness = cachedCheck(
    async () =>
      (await temporalAnswers(client)) ? undefined : `Temporal at ${config.temporal.address} does not answer`,
    READINESS_TTL_MS,
  );
  const snapshots = config.snapshots
    ? new SnapshotOperations(client, config.driverName, { eagerStart: true })
    : undefined;
  const controller = createControllerService(operations, config, snapshots);
  return { csi: { identity, controller }, live, readiness };
}

/** Loaded only when asked for: @kubernetes/client-node is large (and ESM, which only Node >= 20.19 requires). */
async function startKubernetes(
  config: ControllerConfig,
  client: Client,
  registry: ReturnType<typeof createProcessMetrics>['registry'],
  logger: Logger,
) {
  if (!config.kubernetes) return undefined;
  const { startControllerKubernetes } = await import('../kubernetes/controller-integration');
  return startControllerKubernetes({
    client,
    driverName: config.driverName,
    nodeDeleted: config.nodeDeleted ?? { kind: 'wait' },
    registry,
    logger,
  });
}

/** How long a /readyz answer is reused: well under the readiness probe's period (deploy/base: 10 s). */
const READINESS_TTL_MS = 3000;

async function temporalAnswers(client: Client): Promise<boolean> {
  try {
    await client.withDeadline(Date.now() + 2000, () => client.workflowService.getSystemInfo({}));
    return true;
  } catch {
    return false;
  }
}
