import { PatchStrategy, StorageV1Api, makeInformer, setHeaderOptions } from '@kubernetes/client-node';
import type { KubeConfig, V1PersistentVolumeClaim, V1Pod } from '@kubernetes/client-node';
import type { Client } from '@temporalio/client';
import type { Registry } from 'prom-client';
import type { Logger } from '../common/logger';
import type { ClaimKube } from './claim-switch';
import type { SnapshotKube } from './snapshot-switch';
import { CopyPlacement, SELECTED_NODE } from './copy-placement';
import { coreApi, customObjectsApi, loadKubeConfig } from './kube-config';
import type { NodeDeletedPolicy } from './node-deleted-policy';
import { startNodeDeletedWatch } from './node-deleted-watch';
import { registerOrphanMetrics } from './orphan-metrics';
import {
  agentPodView,
  failHoldOfPod,
  NODE_DELETED,
  notReadyReason,
  POD_DELETED,
  type AgentPodView,
} from './agent-readiness';
import { writtenOffEvents } from './written-off-events';
import type { WrittenOffReport } from '../activities/control-activities';

/**
 * What the controller does with Kubernetes (`--kubernetes`): the Node-deleted policy, the orphan metric, the Events
 * on deleting what was written off, a restore's or clone's claim sent to its source's node (copy-placement.ts), and
 * with --agent-pods a node turned offline as soon as Kubernetes reports its agent gone (agent-readiness.ts).
 * The controller's CSI work never depends on it: provisioning goes through external-provisioner.
 */
export async function startControllerKubernetes(deps: {
  client: Client;
  driverName: string;
  nodeDeleted: NodeDeletedPolicy;
  /** --agent-pods and --agent-namespace; absent: nodes turn offline only by their records' heartbeat timeout. */
  agentPods?: { selector: string; namespace?: string };
  registry: Registry;
  logger: Logger;
}): Promise<{ stop(): Promise<void>; reportWrittenOff(report: WrittenOffReport): Promise<void> }> {
  const kubeConfig = loadKubeConfig();
  const logger = deps.logger.child({ part: 'kubernetes' });
  const core = coreApi(kubeConfig);
  registerOrphanMetrics(deps.registry, { ...deps, kubernetes: { core, custom: customObjectsApi(kubeConfig) }, logger });
  const agents = deps.agentPods && startAgentPodWatch(kubeConfig, deps.agentPods, deps.client, deps.driverName, logger);
  const watch = await startNodeDeletedWatch({
    ...deps,
    kubeConfig,
    policy: deps.nodeDeleted,
    logger,
    onNodeDeleted: agents ? (name) => agents.nodeDeleted(name) : undefined,
  });
  const copies = startCopyPlacement(kubeConfig, deps.driverName, logger);
  return {
    stop: async () => {
      await agents?.stop();
      await copies.stop();
      await watch.stop();
    },
    reportWrittenOff: writtenOffEvents(core, deps.driverName, logger),
  };
}

/** The client a move's switch uses (kubernetes/claim-switch.ts), from the same configuration as the rest. */
export function claimKube(): ClaimKube {
  return {
    core: coreApi(loadKubeConfig()),
    mergePatch: setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
  };
}

/** The client a snapshot move's switch uses (kubernetes/snapshot-switch.ts): the snapshot CRDs, merge patches. */
export function snapshotKube(): SnapshotKube {
  return {
    custom: customObjectsApi(loadKubeConfig()),
    mergePatch: setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
  };
}

/** `nodes evacuate`'s: the switch's, and StorageClasses (their allowedTopologies). */
export function evacuationKube(): ClaimKube & { storage: StorageV1Api; custom: ReturnType<typeof customObjectsApi> } {
  const config = loadKubeConfig();
  return {
    ...claimKube(),
    storage: config.makeApiClient(StorageV1Api),
    custom: customObjectsApi(config),
  };
}

/**
 * Watches claims (every namespace) and hands each one added or changed to CopyPlacement. Never holds the controller
 * up: a watch that cannot start (the API server away, or a ClusterRole of an earlier release without `watch` on
 * claims during a rollout) is logged and tried again every 10 s, as after an error (client-node's informer stops on
 * one); its re-list hands every claim again, so none waiting is missed.
 */
function startCopyPlacement(kubeConfig: KubeConfig, driverName: string, logger: Logger): { stop(): Promise<void> } {
  const core = coreApi(kubeConfig);
  const informer = makeInformer<V1PersistentVolumeClaim>(kubeConfig, '/api/v1/persistentvolumeclaims', () =>
    core.listPersistentVolumeClaimForAllNamespaces(),
  );
  const placement = new CopyPlacement({
    core,
    custom: customObjectsApi(kubeConfig),
    driverName,
    logger,
    claim: (namespace, name) => informer.get(name, namespace),
    select: async (claim, node) => {
      const { name = '', namespace = '', resourceVersion } = claim.metadata ?? {};
      // The claim's resourceVersion is the precondition: a claim changed since (a node selected) answers 409.
      await core.patchNamespacedPersistentVolumeClaim(
        { name, namespace, body: { metadata: { resourceVersion, annotations: { [SELECTED_NODE]: node } } } },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      );
    },
  });
  const handle = (claim: V1PersistentVolumeClaim) =>
    void placement
      .seen(claim)
      .catch((error: unknown) =>
        logger.warn({ err: error, claim: claim.metadata?.name }, "selecting a copy's source node failed"),
      );
  informer.on('add', handle);
  informer.on('update', handle);
  return keepRunning(informer, 'claim watch', logger);
}

/**
 * Starts an informer and keeps it running: one that cannot start (the API server away, a role without `watch` during a
 * rollout) is tried again every 10 s, as after an error (client-node's informer stops on one); its re-list hands every
 * object again, so none is missed.
 */
function keepRunning(
  informer: { start(): Promise<void>; stop(): Promise<void>; on(verb: 'error', cb: (error: unknown) => void): void },
  what: string,
  logger: Logger,
): { stop(): Promise<void> } {
  let stopped = false;
  const start = () => {
    if (stopped) return;
    informer.start().catch((error: unknown) => {
      logger.warn({ err: error }, `${what} could not start; retrying in 10 s`);
      setTimeout(start, 10_000);
    });
  };
  informer.on('error', (error) => {
    logger.warn({ err: error }, `${what} failed; restarting it in 10 s`);
    setTimeout(start, 10_000);
  });
  start();
  return {
    async stop() {
      stopped = true;
      await informer.stop();
    },
  };
}

/**
 * Watches the agents' Pods (one namespace, one selector: the DaemonSet's own, not every Pod of the cluster) and fails
 * the hold of an agent Kubernetes reports gone or not ready (agent-readiness.ts). Never holds the controller up: a
 * watch that cannot start is tried again every 10 s, and its re-list hands every Pod again.
 */
function startAgentPodWatch(
  kubeConfig: KubeConfig,
  agentPods: { selector: string; namespace?: string },
  client: Client,
  driverName: string,
  logger: Logger,
): { stop(): Promise<void>; nodeDeleted(name: string): void } {
  const { selector } = agentPods;
  // The controller's own namespace by default (in a Pod, its ServiceAccount's): the DaemonSet's.
  const namespace =
    agentPods.namespace ?? kubeConfig.getContextObject(kubeConfig.currentContext)?.namespace ?? 'default';
  const core = coreApi(kubeConfig);
  const informer = makeInformer<V1Pod>(
    kubeConfig,
    `/api/v1/namespaces/${namespace}/pods`,
    () => core.listNamespacedPod({ namespace, labelSelector: selector }),
    selector,
  );
  const seen = new Map<string, AgentPodView>();
  let stopped = false;
  const act = (view: AgentPodView, why: string, attempt = 1) => {
    const pod = { name: view.name, namespace, nodeId: view.nodeId ?? '' };
    failHoldOfPod(client, driverName, pod, why)
      .then((outcome) =>
        logger.info({ pod: view.name, node: pod.nodeId, why, outcome }, 'agent reported gone by Kubernetes'),
      )
      .catch((error: unknown) => {
        logger.warn(
          { err: error, pod: view.name, node: pod.nodeId },
          'failing the hold of an agent reported gone failed',
        );
        // Temporal away: tried twice more; past that the hold's own heartbeat timeout takes the node offline.
        if (attempt < 3 && !stopped) setTimeout(() => act(view, why, attempt + 1), 10_000);
      });
  };
  const handle = (pod: V1Pod) => {
    const view = agentPodView(pod);
    const why = notReadyReason(seen.get(view.name), view);
    seen.set(view.name, view);
    if (why) act(view, why);
  };
  informer.on('add', handle);
  informer.on('update', handle);
  // A Pod deleted counts too: a deleted Node's Pods are deleted by the Pod garbage collector, not marked not ready, and
  // its agent may be frozen or cut off with it. (A Pod deleted in a rollout had its agent stop first: no hold left.)
  informer.on('delete', (pod) => {
    const view = agentPodView(pod);
    seen.delete(view.name);
    if (view.nodeId) act(view, POD_DELETED);
  });
  const running = keepRunning(informer, `agent Pod watch (${namespace}, ${selector})`, logger);
  logger.info({ namespace, selector }, "watching the agents' Pods: an agent reported gone turns its node offline");
  return {
    // A Node deleted: its Pods stay until the Pod garbage collector deletes them (after 40 s), not marked not ready,
    // while its agent may be frozen or cut off with it.
    nodeDeleted: (name) => {
      for (const view of seen.values()) if (view.nodeId === name) act(view, NODE_DELETED);
    },
    async stop() {
      stopped = true;
      await running.stop();
    },
  };
}
