import type { Client } from '@temporalio/client';
import type { Registry } from 'prom-client';
import type { Logger } from '../common/logger';
import { coreApi, loadKubeConfig } from './kube-config';
import type { NodeDeletedPolicy } from './node-deleted-policy';
import { startNodeDeletedWatch } from './node-deleted-watch';
import { registerOrphanMetrics } from './orphan-metrics';

/**
 * What the controller does with Kubernetes (`--kubernetes`): the Node-deleted policy and the orphan metric.
 * The controller's CSI work never depends on it: provisioning goes through external-provisioner.
 */
export async function startControllerKubernetes(deps: {
  client: Client;
  driverName: string;
  nodeDeleted: NodeDeletedPolicy;
  registry: Registry;
  logger: Logger;
}): Promise<{ stop(): Promise<void> }> {
  const kubeConfig = loadKubeConfig();
  const logger = deps.logger.child({ part: 'kubernetes' });
  registerOrphanMetrics(deps.registry, { ...deps, core: coreApi(kubeConfig), logger });
  return startNodeDeletedWatch({ ...deps, kubeConfig, policy: deps.nodeDeleted, logger });
}
