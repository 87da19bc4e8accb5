import { createHash, randomBytes, randomUUID } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { V1PersistentVolume, V1PersistentVolumeClaim, V1PersistentVolumeList } from '@kubernetes/client-node';
import { TOPOLOGY_NODE_KEY, parseVolumeId } from '../../common/names';
import type { TestCluster } from '../support/cluster';
import { MiB, createRequest, createVolume, onNode, retryLikeCo } from '../support/csi-requests';
import { eventually } from '../support/eventually';
import { BLOCK_CAPABILITY } from '../integration/node-helpers';
import { runCli, type CliResult } from '../support/run-cli';
import { testTemporalFlags } from '../support/test-temporal';
import type { ControlPlane } from './control-plane';
import type { KubeRest } from './kube-rest';

/**
 * What the tests of a move's switch on a real API server share (volume-move-claims.test.ts and
 * volume-move-temporal-switch.test.ts): claims bound to a volume on node-a, Pods that hold or strand them, and the
 * watch of the promises (every PV of the driver names a volume on its node; there is always a copy).
 */
export class MoveHarness {
  readonly namespace = 'default';
  readonly size = 64 * MiB;
  private readonly watches: { stop(): Promise<string[]> }[] = [];

  constructor(
    private readonly api: () => KubeRest,
    private readonly cluster: TestCluster,
    readonly storageClass: string,
  ) {}

  /**
   * The control plane with the PV controller binding claims (and the protection controllers), KUBECONFIG pointing at
   * it for the controller to come; stopped again if it does not start.
   */
  static async startPlane(plane: ControlPlane): Promise<KubeRest> {
    try {
      await plane.start([
        'persistentvolume-binder-controller',
        'persistentvolumeclaim-protection-controller',
        'persistentvolume-protection-controller',
      ]);
    } catch (error) {
      await plane.stop();
      throw error;
    }
    process.env.KUBECONFIG = plane.adminKubeconfig();
    return plane.rest();
  }

  /** The StorageClass the claims name (WaitForFirstConsumer, this driver). */
  async createStorageClass(): Promise<void> {
    await this.api().create('/apis/storage.k8s.io/v1/storageclasses', {
      metadata: { name: this.storageClass },
      provisioner: this.cluster.driverName,
      volumeBindingMode: 'WaitForFirstConsumer',
    });
  }

  /** `durable-csi ...` for this driver, with the Temporal flags of the moment (a suite may run its own server). */
  cli(...args: string[]): Promise<CliResult> {
    return runCli([...args, '--driver-name', this.cluster.driverName, ...testTemporalFlags()], { timeoutMs: 240_000 });
  }

  /** Until `volumes describe` says the move's switch waits for the Pod on node-a. */
  async untilWaitingForPod(volumeId: string, pod: string): Promise<void> {
    await eventually(
      'the move waiting for the Pod on node-a',
      async () =>
        (await this.cli('volumes', 'describe', volumeId)).stdout.includes(
          `is used by Pod ${this.namespace}/${pod} on node node-a`,
        ),
      120_000,
      1000,
    );
  }

  /** The PVs a move of `volumeId` made (annotated moved-from it). */
  async movedPvs(volumeId: string): Promise<V1PersistentVolume[]> {
    const pvs = await this.api().get<V1PersistentVolumeList>('/api/v1/persistentvolumes');
    return pvs.items.filter((pv) => pv.metadata?.annotations?.['durable-csi.io/moved-from'] === volumeId);
  }

  claimPath(name: string): string {
    return `/api/v1/namespaces/${this.namespace}/persistentvolumeclaims/${name}`;
  }

  /** A volume's image file, in the pool of the node its ID names. */
  image(volumeId: string): string {
    const parts = parseVolumeId(volumeId)!;
    return path.join(this.cluster.pool(parts.nodeId), 'volumes', parts.key, 'disk.img');
  }

  sha256(file: string): string {
    return createHash('sha256').update(fs.readFileSync(file)).digest('hex');
  }

  /**
   * A block volume on node-a with random data at its start, its PV (as external-provisioner makes one) and its claim,
   * bound by the PV controller.
   */
  async boundClaim(
    name: string,
    controllerEndpoint: string,
  ): Promise<{ volumeId: string; pvName: string; uid: string }> {
    const { namespace, size } = this;
    const api = this.api();
    const request = createRequest(name, size, { ...onNode('node-a'), volume_capabilities: [BLOCK_CAPABILITY] });
    const made = await retryLikeCo(() => createVolume(this.cluster.csi(controllerEndpoint), request));
    const volumeId = made.volume!.volume_id;
    const file = fs.openSync(this.image(volumeId), 'r+');
    fs.writeSync(file, randomBytes(8 * MiB), 0, 8 * MiB, 0);
    fs.fsyncSync(file);
    fs.closeSync(file);
    const pvName = `pvc-${randomBytes(8).toString('hex')}`;
    await api.create('/api/v1/persistentvolumes', {
      metadata: { name: pvName, annotations: { 'pv.kubernetes.io/provisioned-by': this.cluster.driverName } },
      spec: {
        capacity: { storage: `${size / MiB}Mi` },
        accessModes: ['ReadWriteOnce'],
        volumeMode: 'Block',
        persistentVolumeReclaimPolicy: 'Delete',
        storageClassName: this.storageClass,
        csi: { driver: this.cluster.driverName, volumeHandle: volumeId },
        claimRef: { namespace, name },
        nodeAffinity: {
          required: {
            nodeSelectorTerms: [{ matchExpressions: [{ key: TOPOLOGY_NODE_KEY, operator: 'In', values: ['node-a'] }] }],
          },
        },
      },
    });
    await api.create(`/api/v1/namespaces/${namespace}/persistentvolumeclaims`, {
      metadata: { name, labels: { app: 'db' }, annotations: { 'example.com/owner': 'team-data' } },
      spec: {
        accessModes: ['ReadWriteOnce'],
        volumeMode: 'Block',
        storageClassName: this.storageClass,
        resources: { requests: { storage: `${size / MiB}Mi` } },
        volumeName: pvName,
      },
    });
    const claim = await eventually(`claim ${name} bound`, async () => {
      const found = await api.get<V1PersistentVolumeClaim>(this.claimPath(name));
      return found.status?.phase === 'Bound' ? found : undefined;
    });
    return { volumeId, pvName, uid: claim.metadata!.uid! };
  }

  /**
   * Every 100 ms until stopped: each PV of the driver must name a volume whose image is on its node, and the volume
   * watched must have a copy (its own image, or that of a PV made moved from it). Stopped by `stop()` or by
   * stopWatches (a test's afterEach); returns what it saw wrong. It reads only the API server and the pools, so it
   * goes on whatever Temporal's state.
   */
  watchPromises(copies: () => string[]): { stop(): Promise<string[]> } {
    const api = this.api();
    const wrong: string[] = [];
    let stopped = false;
    const loop = (async () => {
      while (!stopped) {
        const pvs = await api.get<V1PersistentVolumeList>('/api/v1/persistentvolumes');
        for (const pv of pvs.items) {
          const handle = pv.spec?.csi?.driver === this.cluster.driverName ? pv.spec.csi.volumeHandle : undefined;
          if (handle && !pv.metadata?.deletionTimestamp && !fs.existsSync(this.image(handle)))
            wrong.push(`PV ${pv.metadata?.name} names ${handle}, which is not on its node`);
        }
        // The copy counts once a PV names it (made moved from the volume watched).
        const watched = copies();
        const moved = pvs.items
          .filter((pv) => watched.includes(pv.metadata?.annotations?.['durable-csi.io/moved-from'] ?? ''))
          .map((pv) => pv.spec?.csi?.volumeHandle ?? '');
        if (![...watched, ...moved].some((volumeId) => fs.existsSync(this.image(volumeId))))
          wrong.push(`no copy of ${watched.join(' or ')}`);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    })().catch((error: unknown) => {
      wrong.push(`the watch failed: ${String(error)}`);
    });
    const watch = {
      async stop() {
        stopped = true;
        await loop;
        return wrong;
      },
    };
    this.watches.push(watch);
    return watch;
  }

  async stopWatches(): Promise<void> {
    for (const watch of this.watches.splice(0)) await watch.stop();
  }

  /** A Pod scheduled to node-a that uses the claim (no kubelet here: it stays there until deleted). */
  async podOnNodeA(name: string, claimName: string): Promise<void> {
    await this.api().create(`/api/v1/namespaces/${this.namespace}/pods`, {
      metadata: { name },
      spec: {
        nodeName: 'node-a',
        containers: [{ name: 'db', image: 'busybox', volumeDevices: [{ name: 'data', devicePath: '/dev/data' }] }],
        volumes: [{ name: 'data', persistentVolumeClaim: { claimName } }],
      },
    });
  }

  /** A Pending Pod of a StatefulSet bound to a node (the API server does not check that the owner exists). */
  async strandedPod(name: string, claimName: string, nodeName: string): Promise<void> {
    await this.api().create(`/api/v1/namespaces/${this.namespace}/pods`, {
      metadata: {
        name,
        ownerReferences: [
          { apiVersion: 'apps/v1', kind: 'StatefulSet', name: 'db', uid: randomUUID(), controller: true },
        ],
      },
      spec: {
        nodeName,
        containers: [{ name: 'db', image: 'busybox', volumeDevices: [{ name: 'data', devicePath: '/dev/data' }] }],
        volumes: [{ name: 'data', persistentVolumeClaim: { claimName } }],
      },
    });
  }
}
