import type { V1PersistentVolume, V1PersistentVolumeClaim } from '@kubernetes/client-node';
import type { KubeRest } from './kube-rest';
import { eventually } from '../support/eventually';

export const E2E_NAMESPACE = 'e2e';
const CLAIMS = `/api/v1/namespaces/${E2E_NAMESPACE}/persistentvolumeclaims`;

/**
 * PVCs of the test namespace and PVs, watched (not polled) so that "Bound at" and "PV gone at" are the API
 * server's notifications, precise enough for the latency figure.
 */
export class ClaimWatch {
  readonly boundAt = new Map<string, number>();
  readonly pvGoneAt = new Map<string, number>();
  private readonly watches: { ready: Promise<void>; stop(): void }[] = [];

  constructor(private readonly api: KubeRest) {}

  async start(): Promise<void> {
    this.watches.push(
      this.api.watch<V1PersistentVolumeClaim>(CLAIMS, (type, claim) => {
        const name = claim.metadata?.name;
        if (type !== 'DELETED' && name && claim.status?.phase === 'Bound' && !this.boundAt.has(name))
          this.boundAt.set(name, Date.now());
      }),
      this.api.watch<V1PersistentVolume>('/api/v1/persistentvolumes', (type, pv) => {
        if (type === 'DELETED' && pv.metadata?.name) this.pvGoneAt.set(pv.metadata.name, Date.now());
      }),
    );
    await Promise.all(this.watches.map((watch) => watch.ready));
  }

  stop(): void {
    for (const watch of this.watches) watch.stop();
  }

  /** A claim; `dataSource` makes it a restore (a VolumeSnapshot) or a clone (a PersistentVolumeClaim). */
  async create(
    name: string,
    storageClassName: string,
    size = '64Mi',
    selectedNode?: string,
    dataSource?: { apiGroup?: string; kind: string; name: string },
  ): Promise<number> {
    const annotations = selectedNode ? { 'volume.kubernetes.io/selected-node': selectedNode } : undefined;
    const startedAt = Date.now();
    await this.api.create(CLAIMS, {
      metadata: { name, annotations },
      spec: {
        accessModes: ['ReadWriteOnce'],
        storageClassName,
        resources: { requests: { storage: size } },
        ...(dataSource ? { dataSource } : {}),
      },
    });
    return startedAt;
  }

  /** The PV bound to the claim, once the claim is Bound. */
  async bound(name: string, timeoutMs = 60_000): Promise<V1PersistentVolume> {
    await eventually(`PVC ${name} Bound`, async () => this.boundAt.has(name), timeoutMs, 50);
    const claim = await this.api.get<V1PersistentVolumeClaim>(`${CLAIMS}/${name}`);
    const pvName = claim.spec?.volumeName;
    if (!pvName) throw new Error(`PVC ${name} is Bound without a volumeName`);
    return this.pv(pvName);
  }

  pv(pvName: string): Promise<V1PersistentVolume> {
    return this.api.get<V1PersistentVolume>(`/api/v1/persistentvolumes/${pvName}`);
  }

  async resize(name: string, size: string): Promise<void> {
    await this.api.patch(`${CLAIMS}/${name}`, { spec: { resources: { requests: { storage: size } } } });
  }

  async delete(name: string): Promise<number> {
    const startedAt = Date.now();
    await this.api.delete(`${CLAIMS}/${name}`);
    return startedAt;
  }

  async pvGone(pvName: string, timeoutMs = 60_000): Promise<number> {
    return eventually(`PV ${pvName} gone`, async () => this.pvGoneAt.get(pvName), timeoutMs, 50);
  }
}
