import type {
  V1PersistentVolume,
  V1PersistentVolumeClaim,
  V1PersistentVolumeClaimList,
  V1PersistentVolumeList,
  V1Pod,
  V1PodList,
} from '@kubernetes/client-node';
import { KubeError } from '../e2e-k8s/kube-rest';
import type { RealCluster } from './real-cluster';
import { eventually } from '../support/eventually';

export const APP_NAMESPACE = 'default';
const CORE = `/api/v1/namespaces/${APP_NAMESPACE}`;
/** The PVC conditions of a resize in progress or failed (k8s.io/api core/v1 PersistentVolumeClaimConditionType). */
const RESIZE_CONDITIONS = new Set(['Resizing', 'FileSystemResizePending', 'ControllerResizeError', 'NodeResizeError']);

/** The node a PV's volume lives on, from its node affinity (the driver's topology key, the only term it writes). */
export function nodeOfVolume(pv: V1PersistentVolume): string | undefined {
  const terms = pv.spec?.nodeAffinity?.required?.nodeSelectorTerms ?? [];
  return terms.flatMap((term) => term.matchExpressions ?? []).flatMap((e) => e.values ?? [])[0];
}

function preferNode(node: string) {
  return {
    nodeAffinity: {
      preferredDuringSchedulingIgnoredDuringExecution: [
        {
          weight: 100,
          preference: { matchExpressions: [{ key: 'kubernetes.io/hostname', operator: 'In', values: [node] }] },
        },
      ],
    },
  };
}

/** Claims and Pods of the scenarios, in the default namespace, through the admin's REST client. */
export class Workloads {
  constructor(
    private readonly node: RealCluster,
    private readonly busybox: string,
  ) {}

  /** A claim; `dataSource` makes it a restore (a VolumeSnapshot) or a clone (a PersistentVolumeClaim). */
  async claim(
    name: string,
    storageClassName: string,
    size = '64Mi',
    block = false,
    dataSource?: { apiGroup?: string; kind: string; name: string },
  ): Promise<void> {
    await this.node.api.create(`${CORE}/persistentvolumeclaims`, {
      metadata: { name },
      spec: {
        accessModes: ['ReadWriteOnce'],
        storageClassName,
        volumeMode: block ? 'Block' : 'Filesystem',
        resources: { requests: { storage: size } },
        ...(dataSource ? { dataSource } : {}),
      },
    });
  }

  /**
   * A Pod holding the claim at /data (or the raw device at /dev/xvda), running `script`, then sleeping; on `node`
   * when named (a WaitForFirstConsumer claim then gets its volume there); `prefer`: a node the scheduler should
   * choose when it can (a preferred node affinity of the highest weight), which steers its choice without binding it.
   */
  async pod(
    name: string,
    claim: string,
    options: { script?: string; fsGroup?: number; block?: boolean; node?: string; prefer?: string } = {},
  ) {
    const volume = options.block
      ? { volumeDevices: [{ name: 'data', devicePath: '/dev/xvda' }] }
      : { volumeMounts: [{ name: 'data', mountPath: '/data' }] };
    await this.node.api.create(`${CORE}/pods`, {
      metadata: { name },
      spec: {
        terminationGracePeriodSeconds: 1,
        automountServiceAccountToken: false,
        securityContext: options.fsGroup ? { fsGroup: options.fsGroup } : {},
        ...(options.node ? { nodeSelector: { 'kubernetes.io/hostname': options.node } } : {}),
        ...(options.prefer ? { affinity: preferNode(options.prefer) } : {}),
        containers: [
          {
            name: 'app',
            image: this.busybox,
            imagePullPolicy: 'Never',
            command: ['sh', '-c', `${options.script ?? 'true'} && exec sleep 3600`],
            ...volume,
          },
        ],
        volumes: [{ name: 'data', persistentVolumeClaim: { claimName: claim } }],
      },
    });
  }

  async waitRunning(name: string, timeoutMs = 90_000): Promise<V1Pod> {
    return eventually(
      `Pod ${name} Running`,
      async () => {
        this.node.assertRunning();
        const pod = await this.getPod(name);
        if (pod.status?.phase === 'Failed') throw new Error(`Pod ${name} failed: ${JSON.stringify(pod.status)}`);
        return pod.status?.phase === 'Running' ? pod : undefined;
      },
      timeoutMs,
    ).catch(async (error: unknown) => {
      throw new Error(`${String(error)}\n${this.describe(name)}`);
    });
  }

  getPod(name: string): Promise<V1Pod> {
    return this.node.api.get<V1Pod>(`${CORE}/pods/${name}`);
  }

  getClaim(name: string): Promise<V1PersistentVolumeClaim> {
    return this.node.api.get<V1PersistentVolumeClaim>(`${CORE}/persistentvolumeclaims/${name}`);
  }

  async volumeOf(claim: string): Promise<V1PersistentVolume> {
    const pvName = (await this.getClaim(claim)).spec?.volumeName;
    if (!pvName) throw new Error(`claim ${claim} is not bound`);
    return this.node.api.get<V1PersistentVolume>(`/api/v1/persistentvolumes/${pvName}`);
  }

  /** Asks for more room: the claim's storage request patched, as a user would (csi-resizer does the rest). */
  async expand(claim: string, size: string): Promise<void> {
    await this.node.api.patch(`${CORE}/persistentvolumeclaims/${claim}`, {
      spec: { resources: { requests: { storage: size } } },
    });
  }

  /**
   * Until the claim's status.capacity is `size` and no resize condition is left (the resize is finished). Only the
   * resize conditions: Kubernetes 1.37 adds others (`Unused`, False while a Pod uses the claim).
   */
  async waitCapacity(claim: string, size: string, timeoutMs = 90_000): Promise<void> {
    let last: V1PersistentVolumeClaim | undefined;
    await eventually(
      `claim ${claim} resized to ${size}`,
      async () => {
        last = await this.getClaim(claim);
        const resizing = (last.status?.conditions ?? []).filter((condition) => RESIZE_CONDITIONS.has(condition.type));
        return last.status?.capacity?.storage === size && resizing.length === 0;
      },
      timeoutMs,
    ).catch((error: unknown) => {
      throw new Error(`${String(error)}
claim status: ${JSON.stringify(last?.status)}
${this.events(claim)}`);
    });
  }

  /** The size in bytes of the filesystem at /data in the Pod, as `df` inside it sees it. */
  dataBytes(pod: string): number {
    return Number(this.exec(pod, "df -k /data | awk 'NR == 2 {print $2}'").trim()) * 1024;
  }

  /** The events of one object in the default namespace, for failure messages. */
  events(name: string): string {
    try {
      return this.node.kubectl([
        'get',
        'events',
        '-n',
        APP_NAMESPACE,
        '--field-selector',
        `involvedObject.name=${name}`,
      ]);
    } catch (error) {
      return String(error);
    }
  }

  exec(pod: string, script: string): string {
    return this.node.kubectl(['exec', '-n', APP_NAMESPACE, pod, '--', 'sh', '-c', script]);
  }

  async deletePod(name: string): Promise<void> {
    await this.node.api.delete(`${CORE}/pods/${name}`);
    await this.waitGone(`${CORE}/pods/${name}`, `Pod ${name}`);
  }

  async deleteClaim(name: string): Promise<void> {
    await this.node.api.delete(`${CORE}/persistentvolumeclaims/${name}`);
    await this.waitGone(`${CORE}/persistentvolumeclaims/${name}`, `claim ${name}`);
  }

  async waitGone(path: string, what: string, timeoutMs = 90_000): Promise<void> {
    await eventually(
      `${what} gone`,
      async () => {
        try {
          await this.node.api.get(path);
          return false;
        } catch (error) {
          if (error instanceof KubeError && error.status === 404) return true;
          throw error;
        }
      },
      timeoutMs,
    );
  }

  /**
   * Deletes every Pod and claim in the namespace and waits for their PVs to go: a failed scenario leaves the
   * next one a clean node (each scenario asserts its own cleanup).
   */
  async cleanUp(): Promise<void> {
    const pods = await this.node.api.get<V1PodList>(`${CORE}/pods`);
    await Promise.all(pods.items.map((pod) => this.deletePod(pod.metadata?.name ?? '')));
    const claims = await this.node.api.get<V1PersistentVolumeClaimList>(`${CORE}/persistentvolumeclaims`);
    await Promise.all(claims.items.map((claim) => this.deleteClaim(claim.metadata?.name ?? '')));
    await eventually(
      'every PV gone',
      async () => (await this.node.api.get<V1PersistentVolumeList>('/api/v1/persistentvolumes')).items.length === 0,
      120_000,
    );
  }

  describe(pod: string): string {
    try {
      return this.node.kubectl(['describe', 'pod', '-n', APP_NAMESPACE, pod]).slice(-3000);
    } catch (error) {
      return String(error);
    }
  }
}
