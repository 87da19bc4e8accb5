import type { CoreV1Api, KubeConfig, V1PersistentVolume, V1PersistentVolumeClaim } from '@kubernetes/client-node';
import { makeInformer } from '@kubernetes/client-node';
import { eventually } from './processes';

export const E2E_NAMESPACE = 'e2e';

/**
 * PVCs of the test namespace and PVs, watched (not polled) so that "Bound at" and "PV gone at" are the API
 * server's notifications, precise enough for the latency figure.
 */
export class ClaimWatch {
  readonly boundAt = new Map<string, number>();
  readonly pvGoneAt = new Map<string, number>();
  private readonly pvcInformer;
  private readonly pvInformer;

  constructor(
    config: KubeConfig,
    private readonly core: CoreV1Api,
  ) {
    this.pvcInformer = makeInformer<V1PersistentVolumeClaim>(
      config,
      `/api/v1/namespaces/${E2E_NAMESPACE}/persistentvolumeclaims`,
      () => core.listNamespacedPersistentVolumeClaim({ namespace: E2E_NAMESPACE }),
    );
    this.pvInformer = makeInformer<V1PersistentVolume>(config, '/api/v1/persistentvolumes', () =>
      core.listPersistentVolume(),
    );
    const onClaim = (claim: V1PersistentVolumeClaim) => {
      const name = claim.metadata?.name;
      if (name && claim.status?.phase === 'Bound' && !this.boundAt.has(name)) this.boundAt.set(name, Date.now());
    };
    this.pvcInformer.on('add', onClaim);
    this.pvcInformer.on('update', onClaim);
    this.pvInformer.on('delete', (pv) => {
      if (pv.metadata?.name) this.pvGoneAt.set(pv.metadata.name, Date.now());
    });
  }

  async start(): Promise<void> {
    await this.pvcInformer.start();
    await this.pvInformer.start();
  }

  async stop(): Promise<void> {
    await this.pvcInformer.stop();
    await this.pvInformer.stop();
  }

  async create(name: string, storageClassName: string, size = '64Mi', selectedNode?: string): Promise<number> {
    const annotations = selectedNode ? { 'volume.kubernetes.io/selected-node': selectedNode } : undefined;
    const startedAt = Date.now();
    await this.core.createNamespacedPersistentVolumeClaim({
      namespace: E2E_NAMESPACE,
      body: {
        metadata: { name, annotations },
        spec: { accessModes: ['ReadWriteOnce'], storageClassName, resources: { requests: { storage: size } } },
      },
    });
    return startedAt;
  }

  /** The PV bound to the claim, once the claim is Bound. */
  async bound(name: string, timeoutMs = 60_000): Promise<V1PersistentVolume> {
    await eventually(`PVC ${name} Bound`, async () => this.boundAt.has(name), timeoutMs, 50);
    const claim = await this.core.readNamespacedPersistentVolumeClaim({ name, namespace: E2E_NAMESPACE });
    const pvName = claim.spec?.volumeName;
    if (!pvName) throw new Error(`PVC ${name} is Bound without a volumeName`);
    return this.core.readPersistentVolume({ name: pvName });
  }

  async delete(name: string): Promise<number> {
    const startedAt = Date.now();
    await this.core.deleteNamespacedPersistentVolumeClaim({ name, namespace: E2E_NAMESPACE });
    return startedAt;
  }

  async pvGone(pvName: string, timeoutMs = 60_000): Promise<number> {
    return eventually(`PV ${pvName} gone`, async () => this.pvGoneAt.get(pvName), timeoutMs, 50);
  }
}
