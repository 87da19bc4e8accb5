import { Client } from '@temporalio/client';
import { Worker } from '@temporalio/worker';
import type { ServerUnaryCall } from '@grpc/grpc-js';
import fs from 'node:fs';
import { createControlActivities, type ControlDeps } from '../activities/control-activities';
import { createPlacementActivities } from '../activities/placement';
import { createLogger, type Logger } from '../common/logger';
import { controlTaskQueue, OPTIONAL_SEARCH_ATTRIBUTE_KEYS } from '../common/names';
import type { TemporalConfig } from '../temporal/config';
import { FollowingConnection, TemporalConnectionError } from '../temporal/connection';
import { driverVersion } from '../common/version';
import { createControllerService } from '../csi/controller-service';
import { createSnapshotHandlers } from '../csi/controller-snapshots';
import { createGroupControllerService } from '../csi/group-controller-service';
import { createIdentityService } from '../csi/identity-service';
import { serveCsi, type AsyncService } from '../csi/server';
import { DriverError, FailureType } from '../common/failures';
import { VolumeOperations } from '../operations/volume-operations';
import { SnapshotOperations } from '../operations/snapshot-operations';
import { missingSearchAttributes } from '../temporal/check-search-attributes';
import { searchAttributeCreateCommands } from '../temporal/register-commands';
import { WORKFLOW_BUNDLE_PATH, WORKFLOWS_PATH } from './bundle-workflows';
import { installTemporalRuntime } from './runtime';
import { applyAgentHeapTuning } from './process-tuning';
import { controllerWorkerTuning } from './worker-options';
import { onShutdownSignal } from './shutdown';
import { backoff, retrying, Stopped } from './retrying';
import { serveHealth } from './health-endpoint';
import { registerControllerMetrics } from '../metrics/controller-metrics';
import { createProcessMetrics, registerClientCertificateExpiry, serveMetrics } from '../metrics/registry';
import type { NodeDeletedPolicy } from '../kubernetes/node-deleted-policy';
import type { ClaimSwitcher, SnapshotSwitcher } from '../activities/control-activities';
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
  /** --agent-pods, --agent-namespace: the agents' Pods, watched for readiness (kubernetes/agent-readiness.ts). */
  agentPods?: { selector: string; namespace?: string };
  /** --snapshots: serve the snapshot calls and advertise their capabilities (docs/snapshots.md). */
  snapshots?: boolean;
}

export interface RunningController {
  stop(): Promise<void>;
}

/** How long the controller waits between attempts to reach Temporal: few replicas, so a short cap (agent/retrying.ts). */
const CONNECT_RETRY_MAX_MS = 5000;

/**
 * The controller: CSI Identity + Controller for external-provisioner, a Temporal client, and the worker that
 * runs every workflow. It keeps nothing in memory that it needs after a restart.
 *
 * It serves before it has reached Temporal, and keeps trying (a controller started during an outage, as a
 * Deployment's Pod is rescheduled meanwhile): CSI Probe and /readyz say not ready and why, /healthz says live (a
 * restart does not bring Temporal back, and a crash loop's back-off, up to 5 minutes, would outlast the outage),
 * and every Controller call answers UNAVAILABLE, which the sidecars retry. A misconfigured connection (TLS, the
 * address) or namespace still stops it at once, saying why.
 */
export async function runController(config: ControllerConfig): Promise<RunningController> {
  applyAgentHeapTuning();
  installTemporalRuntime(config.sdkMetricsAddress);
  const logger = createLogger('controller');
  const metrics = createProcessMetrics('controller');
  const temporal = startControllerTemporal(config, metrics.registry, logger);
  const services = csiServices(temporal, config);
  // From the start: durable_csi_temporal_up says 0 while Temporal is out of reach, the rest waits for the client.
  const client = () => temporal.connected()?.client;
  registerControllerMetrics(metrics.registry, client, config.driverName, logger, services.readiness);
  registerClientCertificateExpiry(metrics.registry, config.temporal.tlsCert, () =>
    temporal.clientCertificateNotAfter(),
  );
  const stopMetrics = config.metricsAddress
    ? await serveMetrics(config.metricsAddress, metrics.registry, logger, services.readiness)
    : undefined;
  const server = await serveCsi(config.endpoint, services.csi, logger, metrics);
  const stopHealth = config.healthAddress
    ? await serveHealth(config.healthAddress, { live: services.live }, logger)
    : undefined;
  logger.info({ driver: config.driverName, temporal: config.temporal.address }, 'controller serving CSI');

  let stopped: Promise<void> | undefined;
  const stop = () =>
    (stopped ??= (async () => {
      await server.close();
      await stopHealth?.();
      await stopMetrics?.();
      await temporal.stop();
    })());
  onShutdownSignal(logger, stop);
  return { stop };
}

/** The controller's Temporal side, once reached: the client and the worker (with what runs beside them). */
interface Connected {
  client: Client;
  worker: Worker;
  /** The namespace has the PVC search attributes (optional: OPTIONAL_SEARCH_ATTRIBUTE_KEYS): creates set them. */
  pvcAttributes: boolean;
}

interface ControllerTemporal {
  /** Set once the worker was created; until then, what the controller waits for. */
  connected(): Connected | undefined;
  waitingFor(): string;
  /** The end of the client certificate the live connection presents; undefined before it or without one. */
  clientCertificateNotAfter(): Date | undefined;
  stop(): Promise<void>;
}

/**
 * Connects in the background, retrying while Temporal does not answer; then checks the namespace, starts the
 * worker, the metrics that read Temporal and the Kubernetes watch. Anything else that fails exits the process.
 */
function startControllerTemporal(
  config: ControllerConfig,
  registry: ReturnType<typeof createProcessMetrics>['registry'],
  logger: Logger,
): ControllerTemporal {
  const abort = new AbortController();
  let waitingFor = `connecting to Temporal at ${config.temporal.address}`;
  let connection: FollowingConnection | undefined;
  let connected: Connected | undefined;
  let workerDone: Promise<void> | undefined;
  let kubernetes: Awaited<ReturnType<typeof startKubernetes>>;

  // A failure no retry fixes (a misconfigured connection, a namespace without the search attributes): it stops the
  // retries and the process, saying why.
  let fatal: Error | undefined;
  const retryOptions = {
    logger,
    signal: abort.signal,
    onFailure: (message: string) => (waitingFor = message),
    delayMs: (n: number) => backoff(n, 1000, CONNECT_RETRY_MAX_MS),
  };
  const giveUp = (error: Error): never => {
    fatal = error;
    abort.abort();
    throw error;
  };

  const start = async () => {
    const reached = await retrying(
      'Temporal',
      () =>
        // It follows the TLS files: a renewed certificate is used without a restart (temporal/connection.ts).
        FollowingConnection.connect(config.temporal, {
          info: (message) => logger.info(message),
          error: (message) => logger.error(message),
        }).catch((error: unknown) =>
          error instanceof TemporalConnectionError && !error.unreachable ? giveUp(error) : Promise.reject(error),
        ),
      retryOptions,
    );
    connection = reached;
    if (abort.signal.aborted) throw new Stopped();
    const client = new Client({ connection: reached, namespace: config.temporal.namespace });
    // Filled in once Kubernetes is watched (below): the worker starts first, and Events are only reports.
    const writtenOffEvents: ControlDeps['writtenOffEvents'] = {};
    let pvcAttributes = true;
    const worker = await retrying(
      'workflow worker',
      async () => {
        const missing = await missingSearchAttributes(reached, config.temporal.namespace);
        const required = missing.filter((name) => !OPTIONAL_SEARCH_ATTRIBUTE_KEYS.includes(name));
        if (required.length > 0) giveUp(missingAttributesError(config, required));
        pvcAttributes = missing.length === 0;
        if (!pvcAttributes)
          logger.warn(
            missingAttributesError(config, missing).message +
              '\n(until then creates are not searchable by their PVC, and `volumes describe --pvc` finds nothing)',
          );
        return createControlWorker(reached, client, config, writtenOffEvents);
      },
      { ...retryOptions, onFailure: (message: string) => (waitingFor = `starting the workflow worker: ${message}`) },
    );
    if (abort.signal.aborted) throw new Stopped();
    reached.serve(worker);
    workerDone = worker.run();
    workerDone.catch((error: unknown) => {
      logger.fatal({ err: error }, 'workflow worker stopped');
      process.exit(1);
    });
    connected = { client, worker, pvcAttributes };
    kubernetes = await startKubernetes(config, client, registry, logger);
    writtenOffEvents.report = kubernetes?.reportWrittenOff;
    logger.info({ driver: config.driverName, temporal: config.temporal.address }, 'controller ready');
  };
  start().catch((error: unknown) => {
    if (error instanceof Stopped && !fatal) return;
    const cause = fatal ?? error;
    logger.fatal({ err: cause }, 'controller cannot start');
    // As the CLI reports a failed start (cli/main.ts): the plain message, for `kubectl logs` and the tests.
    process.stderr.write(`durable-csi: ${cause instanceof Error ? cause.message : String(cause)}\n`);
    process.exit(1);
  });

  return {
    connected: () => connected,
    waitingFor: () => waitingFor,
    clientCertificateNotAfter: () => connection?.clientCertificateNotAfter,
    async stop() {
      abort.abort();
      await kubernetes?.stop();
      if (connected?.worker.getState() === 'RUNNING') connected.worker.shutdown();
      await workerDone?.catch(() => undefined);
      await connection?.close();
    },
  };
}

/** A namespace without the driver's search attributes is refused, with the commands that register them. */
function missingAttributesError(config: ControllerConfig, missing: string[]): Error {
  const commands = searchAttributeCreateCommands(config.temporal, missing).join('\n  ');
  return new Error(
    `namespace "${config.temporal.namespace}" lacks the search attributes ${missing.join(', ')}; register them:\n  ${commands}`,
  );
}

/** The worker of the control queue: every workflow, and the controller's own activities. */
function createControlWorker(
  connection: FollowingConnection,
  client: Client,
  config: ControllerConfig,
  writtenOffEvents: ControlDeps['writtenOffEvents'],
): Promise<Worker> {
  return Worker.create({
    connection: connection.native,
    namespace: config.temporal.namespace,
    taskQueue: controlTaskQueue(config.driverName),
    ...(fs.existsSync(WORKFLOW_BUNDLE_PATH)
      ? { workflowBundle: { codePath: WORKFLOW_BUNDLE_PATH } }
      : { workflowsPath: WORKFLOWS_PATH }),
    activities: {
      ...createControlActivities({
        client,
        driverName: config.driverName,
        writtenOffEvents,
        ...(config.kubernetes ? { claims: claimKubeOnce(), snapshots: snapshotKubeOnce() } : {}),
      }),
      ...createPlacementActivities({ client, driverName: config.driverName }),
    },
    shutdownGraceTime: '5s',
    ...controllerWorkerTuning(),
  });
}

/** CSI Identity and Controller, and the liveness and readiness the probes read. */
function csiServices(temporal: ControllerTemporal, config: ControllerConfig) {
  const running = () => temporal.connected()?.worker.getState() === 'RUNNING';
  const identity = createIdentityService({
    driverName: config.driverName,
    version: driverVersion(),
    // Initialised (csi/identity-service.ts); whether Temporal answers now is /readyz below.
    ready: async () => running(),
  });
  // The Pod's liveness (/healthz): the worker runs, or Temporal is still being reached (which a restart would not
  // hasten); Temporal's health is readiness (/readyz on the metrics port).
  const live = async () => temporal.connected() === undefined || running();
  // Cached: every probe (kubelet's, a scraper's) would otherwise be a Temporal call.
  const answers = cachedCheck(async () => {
    const connected = temporal.connected();
    if (!connected) return `not connected to Temporal yet: ${temporal.waitingFor()}`;
    return (await temporalAnswers(connected.client))
      ? undefined
      : `Temporal at ${config.temporal.address} does not answer`;
  }, READINESS_TTL_MS);
  return {
    csi: {
      identity,
      controller: untilConnected(temporal, config),
      groupController: groupUntilConnected(temporal, config),
    },
    live,
    readiness: answers,
  };
}

/**
 * The Controller service, which needs Temporal: until the controller has reached it, every call answers
 * UNAVAILABLE saying what it waits for (the sidecars retry); then the real handlers, made once.
 */
function untilConnected(temporal: ControllerTemporal, config: ControllerConfig): AsyncService {
  let service: AsyncService | undefined;
  const handlers = (): AsyncService | undefined => {
    const connected = temporal.connected();
    if (!connected || service) return service;
    // Eager start: the client shares the worker's connection and the worker polls the control queue.
    const operations = new VolumeOperations(connected.client, config.driverName, {
      eagerStart: true,
      pvcAttributes: connected.pvcAttributes,
    });
    const snapshots = config.snapshots
      ? new SnapshotOperations(connected.client, config.driverName, { eagerStart: true })
      : undefined;
    service = createControllerService(
      operations,
      config,
      snapshots && (createSnapshotHandlers(snapshots, config) as AsyncService),
    ) as AsyncService;
    return service;
  };
  // Which methods are served depends on the configuration only, and making the handlers calls nothing: the names
  // come from a service made over operations that are never called.
  const unused = {} as VolumeOperations & SnapshotOperations;
  const snapshotHandlers = config.snapshots ? (createSnapshotHandlers(unused, config) as AsyncService) : undefined;
  const names = Object.keys(createControllerService(unused, config, snapshotHandlers));
  return waitingForTemporal(temporal, names, handlers);
}

/** The GroupController, which needs Temporal as the Controller does; group snapshots only with --snapshots. */
function groupUntilConnected(temporal: ControllerTemporal, config: ControllerConfig): AsyncService {
  let service: AsyncService | undefined;
  const handlers = (): AsyncService | undefined => {
    const connected = temporal.connected();
    if (!connected || service) return service;
    const snapshots = config.snapshots
      ? new SnapshotOperations(connected.client, config.driverName, { eagerStart: true })
      : undefined;
    service = createGroupControllerService(snapshots, config) as AsyncService;
    return service;
  };
  const unused = config.snapshots ? ({} as SnapshotOperations) : undefined;
  const names = Object.keys(createGroupControllerService(unused, config));
  return waitingForTemporal(temporal, names, handlers);
}

/** Each method answers UNAVAILABLE, saying what it waits for, until `handlers` has the real ones. */
function waitingForTemporal(
  temporal: ControllerTemporal,
  names: string[],
  handlers: () => AsyncService | undefined,
): AsyncService {
  return Object.fromEntries(
    names.map((name) => [
      name,
      async (request: never, call: ServerUnaryCall<unknown, unknown>) => {
        const handler = handlers()?.[name];
        if (!handler)
          throw new DriverError(FailureType.Unavailable, `not connected to Temporal yet: ${temporal.waitingFor()}`);
        return handler(request, call);
      },
    ]),
  );
}

/** Loaded only when asked for: @kubernetes/client-node is large (and ESM, which only Node >= 20.19 requires). */
/** Loaded on a move's first switch, once (the Kubernetes modules load only with --kubernetes, as below). */
function claimKubeOnce(): () => Promise<ClaimSwitcher> {
  let switcher: Promise<ClaimSwitcher> | undefined;
  return () =>
    (switcher ??= Promise.all([
      import('../kubernetes/controller-integration'),
      import('../kubernetes/claim-switch'),
    ]).then(([integration, claims]) => claims.claimSwitcher(integration.claimKube())));
}

/** Loaded on a snapshot move's first switch, once. */
function snapshotKubeOnce(): () => Promise<SnapshotSwitcher> {
  let switcher: Promise<SnapshotSwitcher> | undefined;
  return () =>
    (switcher ??= Promise.all([
      import('../kubernetes/controller-integration'),
      import('../kubernetes/snapshot-switch'),
    ]).then(([integration, snapshots]) => snapshots.snapshotSwitcher(integration.snapshotKube())));
}

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
    agentPods: config.agentPods,
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
