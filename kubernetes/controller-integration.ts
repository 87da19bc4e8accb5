import type { Client } from '@temporalio/client';
import type { Registry } from 'prom-client';
import type { Logger } from '../common/logger';
import { coreApi, customObjectsApi, loadKubeConfig } from './kube-config';
import type { NodeDeletedPolicy } from './node-deleted-policy';
import { startNodeDeletedWatch } from './node-deleted-watch';
import { registerOrphanMetrics } from './orphan-metrics';
import { writtenOffEvents } from './written-off-events';
import type { WrittenOffReport } from '../activities/control-activities';

/**
 * What the controller does with Kubernetes (`--kubernetes`): the Node-deleted policy, the orphan metric and
 * the Events on deleting what was written off.
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
  return { stop: () => watch.stop(), reportWrittenOff: writtenOffEvents(core, deps.driverName, logger) };
}
