import { createLogger, type Logger } from '../common/logger';
import type { TemporalConfig } from '../temporal/config';
import { driverVersion } from '../common/version';
import { call, connectCsi, withDeadline } from '../csi/client';
import { createIdentityService } from '../csi/identity-service';
import { createNodeService } from '../csi/node-service';
import { serveCsi } from '../csi/server';
import { serveHealth } from './health-endpoint';
import { startPluginRegistration, type PluginRegistrationOptions } from './plugin-registration';
import { registerNodeMetrics } from '../metrics/node-metrics';
import { createProcessMetrics, registerClientCertificateExpiry, serveMetrics } from '../metrics/registry';
import { AgentPool } from './agent-pool';
import { prepareBackend, type BackendConfig } from './create-backend';
import { withFailpoints, type Failpoint } from './failpoints';
import { startNodeTemporal } from './node-temporal';
import { applyAgentHeapTuning } from './process-tuning';
import { installTemporalRuntime } from './runtime';
import { onShutdownSignal } from './shutdown';

export interface NodeAgentConfig {
  endpoint: string;
  driverName: string;
  nodeId: string;
  backend: BackendConfig;
  temporal: TemporalConfig;
  /** `--kubelet-dir`: staging and target paths must resolve inside it. */
  kubeletDir: string;
  /** `--failpoints` (test harnesses only). */
  failpoints?: Set<Failpoint>;
  /** `--accept-new-pool`: the pool identity the operator declared gone for good (agent/pool-gate.ts). */
  acceptNewPool?: string;
  /** `--presence-timeout`: how soon the node shows offline once its agent stops heartbeating. */
  presenceTimeoutMs: number;
  /** `--transfer-address` and `--transfer-port`: where moves' copies are served (docs/volume-moves.md); off when absent. */
  transfer?: { host: string; port: number };
  /** host:port for our Prometheus metrics, /readyz and /livez; off when empty. */
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
 * runs the storage activities. kubelet is served first and whatever Temporal's state (a reboot during an outage
 * must still stage, publish and unpublish); everything that needs Temporal starts in the background
 * (agent/node-temporal.ts), and readiness says when it runs.
 */
export async function runNodeAgent(config: NodeAgentConfig): Promise<{ stop(): Promise<void> }> {
  applyAgentHeapTuning();
  installTemporalRuntime(config.sdkMetricsAddress);
  const logger = createLogger('node').child({ node: config.nodeId });

  // 1. The pool, if it has an identity: kubelet's calls on its volumes need nothing else.
  const pool = await openPool(config, logger);
  // 2. Everything that needs Temporal, in the background: connect, settle the pool, worker, record.
  const temporal = startNodeTemporal({ ...config, poolDir: config.backend.pool }, pool, logger);
  // Readiness (csi/identity-service.ts): false until the worker runs; never a reason to restart the process.
  const readiness = async () => temporal.notReady();
  const metrics = createProcessMetrics('node');
  registerNodeMetrics(metrics.registry, pool.backend, config.nodeId);
  registerClientCertificateExpiry(metrics.registry, config.temporal.tlsCert, () =>
    temporal.clientCertificateNotAfter(),
  );
  // 3. CSI for kubelet, at once, whatever Temporal's state.
  const server = await serveCsi(
    config.endpoint,
    {
      identity: createIdentityService({
        driverName: config.driverName,
        version: driverVersion(),
        ready: async () => (await readiness()) === undefined,
      }),
      node: createNodeService({
        nodeId: config.nodeId,
        poolId: () => pool.poolId(),
        poolRefusal: () => pool.refused(),
        backend: pool.backend,
        kubeletDir: config.kubeletDir,
      }),
    },
    logger,
    metrics,
  );
  // 4. Metrics, /readyz (readiness) and /livez (liveness: our CSI socket answers).
  const stopMetrics = config.metricsAddress
    ? await serveMetrics(config.metricsAddress, metrics.registry, logger, readiness, () => csiAnswers(config.endpoint))
    : undefined;
  logger.info({ driver: config.driverName, backend: pool.backend.kind }, 'node agent serving CSI');
  // 5. kubelet's side (docs/kubernetes.md, "Registration"): registration once CSI answers. The Pod's probes:
  // liveness is our CSI socket answering, readiness is Temporal reached and kubelet having registered us.
  const { driverName, endpoint: csiEndpoint } = config;
  const registration =
    config.registration && (await startPluginRegistration({ ...config.registration, driverName, csiEndpoint, logger }));
  const podReady = async () =>
    (await readiness()) ??
    (!registration || registration.registered() ? undefined : 'kubelet has not registered the plugin yet');
  const live = async () => (await csiAnswers(config.endpoint)) === undefined;
  const stopHealth = config.healthAddress
    ? await serveHealth(config.healthAddress, { live, ready: podReady }, logger)
    : undefined;

  let stopped: Promise<void> | undefined;
  const stop = () =>
    (stopped ??= (async () => {
      await temporal.stop();
      await registration?.stop();
      await server.close();
      await stopHealth?.();
      await stopMetrics?.();
      await pool.close();
    })());
  onShutdownSignal(logger, stop);
  return { stop };
}

/**
 * The backend, failpoints armed if asked, and its pool opened now if its filesystem is fit and it has an identity
 * (agent/agent-pool.ts).
 */
async function openPool(config: NodeAgentConfig, logger: Logger): Promise<AgentPool> {
  const failpoints = config.failpoints ?? new Set<Failpoint>();
  if (failpoints.size > 0)
    logger.warn({ failpoints: [...failpoints] }, 'failpoints armed: this agent will kill itself');
  const backend = prepareBackend(config.backend, logger);
  const pool = new AgentPool(withFailpoints(backend, failpoints), logger);
  // A refused filesystem is said by readiness and looked at again in the background (agent/node-temporal.ts).
  const unfit = await pool.openIfIdentified(config.nodeId);
  if (unfit !== undefined) logger.warn(unfit);
  return pool;
}

/** Liveness (/livez): our own CSI socket answers. Undefined when it does, else why not. */
async function csiAnswers(endpoint: string): Promise<string | undefined> {
  const clients = connectCsi(endpoint);
  try {
    await call((done) => clients.identity.GetPluginInfo({}, withDeadline(3000), done));
    return undefined;
  } catch (error) {
    return `CSI endpoint ${endpoint} does not answer: ${error instanceof Error ? error.message : String(error)}`;
  } finally {
    clients.close();
  }
}
