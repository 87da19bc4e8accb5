import { PatchStrategy, StorageV1Api, makeInformer, setHeaderOptions } from '@kubernetes/client-node';
import type { KubeConfig, V1PersistentVolumeClaim } from '@kubernetes/client-node';
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
import { writtenOffEvents } from './written-off-events';
import type { WrittenOffReport } from '../activities/control-activities';

/**
 * What the controller does with Kubernetes (`--kubernetes`): the Node-deleted policy, the orphan metric, the Events
 * on deleting what was written off, and a restore's or clone's claim sent to its source's node (copy-placement.ts).
 * The controller's CSI work never depends on it: provisioning goes through external-provisioner.
 */
export async function startControllerKubernetes(deps: {
  client: Client;
  driverName: string;
  nodeDeleted: NodeDeletedPolicy;
  registry: Registry;
  logger: Logger;
}): Promise<{ stop(): Promise<void>; reportWrittenOff(report: WrittenOffReport): Promise<void> }> {
  const kubeConfig = loadKubeConfig();
  const logger = deps.logger.child({ part: 'kubernetes' });
  const core = coreApi(kubeConfig);
  registerOrphanMetrics(deps.registry, { ...deps, kubernetes: { core, custom: customObjectsApi(kubeConfig) }, logger });
  const watch = await startNodeDeletedWatch({ ...deps, kubeConfig, policy: deps.nodeDeleted, logger });
  const copies = startCopyPlacement(kubeConfig, deps.driverName, logger);
  return {
    stop: async () => {
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
  let stopped = false;
  const start = () => {
    if (stopped) return;
    informer.start().catch((error: unknown) => {
      logger.warn({ err: error }, 'claim watch could not start; retrying in 10 s');
      setTimeout(start, 10_000);
    });
  };
  informer.on('error', (error) => {
    logger.warn({ err: error }, 'claim watch failed; restarting it in 10 s');
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
