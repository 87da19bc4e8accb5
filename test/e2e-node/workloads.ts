import type { V1PersistentVolume, V1PersistentVolumeClaim, V1Pod } from '@kubernetes/client-node';
import { KubeError } from '../e2e-k8s/kube-rest';
import { eventually } from '../e2e-k8s/processes';
import type { RealNode } from './real-node';

export const APP_NAMESPACE = 'default';
const CORE = `/api/v1/namespaces/${APP_NAMESPACE}`;

/** Claims and Pods of the scenarios, in the default namespace, through the admin's REST client. */
export class Workloads {
  constructor(
    private readonly node: RealNode,
    private readonly busybox: string,
  ) {}

  async claim(name: string, storageClassName: string, size = '64Mi', block = false): Promise<void> {
    await this.node.api.create(`${CORE}/persistentvolumeclaims`, {
      metadata: { name },
      spec: {
        accessModes: ['ReadWriteOnce'],
        storageClassName,
        volumeMode: block ? 'Block' : 'Filesystem',
        resources: { requests: { storage: size } },
      },
    });
  }

  /** A Pod holding the claim at /data (or the raw device at /dev/xvda), running `script`, then sleeping. */
  async pod(name: string, claim: string, options: { script?: string; fsGroup?: number; block?: boolean } = {}) {
    const volume = options.block
      ? { volumeDevices: [{ name: 'data', devicePath: '/dev/xvda' }] }
      : { volumeMounts: [{ name: 'data', mountPath: '/data' }] };
    await this.node.api.create(`${CORE}/pods`, {
      metadata: { name },
      spec: {
        terminationGracePeriodSeconds: 1,
        automountServiceAccountToken: false,
        securityContext: options.fsGroup ? { fsGroup: options.fsGroup } : {},
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

  describe(pod: string): string {
    try {
      return this.node.kubectl(['describe', 'pod', '-n', APP_NAMESPACE, pod]).slice(-3000);
    } catch (error) {
      return String(error);
    }
  }
}
