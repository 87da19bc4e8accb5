import { CoreV1Api, CustomObjectsApi, KubeConfig } from '@kubernetes/client-node';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/**
 * Where durable-csi finds Kubernetes, as kubectl does: an explicit file, else $KUBECONFIG, else ~/.kube/config,
 * else the Pod's ServiceAccount. Refuses to guess further (client-node would fall back to localhost:8080).
 */
export function loadKubeConfig(file?: string): KubeConfig {
  const config = new KubeConfig();
  const explicit = file ?? process.env.KUBECONFIG;
  const home = path.join(os.homedir(), '.kube', 'config');
  if (explicit) config.loadFromFile(explicit);
  else if (fs.existsSync(home)) config.loadFromFile(home);
  else if (process.env.KUBERNETES_SERVICE_HOST) config.loadFromCluster();
  else
    throw new Error(
      'no Kubernetes configuration: set KUBECONFIG (or --kubeconfig), create ~/.kube/config, or run in a Pod',
    );
  return config;
}

export function coreApi(config: KubeConfig): CoreV1Api {
  return config.makeApiClient(CoreV1Api);
}

/** For the CRDs client-node has no typed API for (VolumeSnapshotContents). */
export function customObjectsApi(config: KubeConfig): CustomObjectsApi {
  return config.makeApiClient(CustomObjectsApi);
}
