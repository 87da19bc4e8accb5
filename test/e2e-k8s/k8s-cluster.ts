import type { V1ConfigMap, V1DaemonSet, V1Deployment, V1PodList } from '@kubernetes/client-node';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { call, connectCsi, withDeadline } from '../../csi/client';
import type { NodeGetInfoResponse__Output } from '../../csi/generated/csi/v1/NodeGetInfoResponse';
import { waitUntilReady } from '../../agent/wait-ready';
import { findProjectRoot } from '../../common/project-root';
import { temporalAddress } from '../support/cluster';
import { ControlPlane, serviceAccount } from './control-plane';
import type { KubeRest } from './kube-rest';
import { preparePod, startLaunch, type PodRun } from './pod-runner';
import { type Proc } from './processes';
import { CONTROL_PLANE_SETS, k8sTools, type K8sTools } from './tools';
import { eventually } from '../support/eventually';

export const NAMESPACE = 'durable-csi';
export const DRIVER = 'durable-csi.io';
const CONTROLLER_SA = 'durable-csi-controller';
const KUBE_CONTROLLERS = [
  'persistentvolume-binder-controller',
  'persistentvolumeclaim-protection-controller',
  'persistentvolume-protection-controller',
  // The controller Deployment's ReplicaSet and Pods exist (never scheduled): csi-provisioner owns its
  // CSIStorageCapacity objects through them (--capacity-ownerref-level=2).
  'deployment-controller',
  'replicaset-controller',
];

export interface ClusterOptions {
  /** Components of deploy/ in the overlay, beyond dir-quota-none (which every development node needs). */
  components?: string[];
  /** What the cluster must have before deploy/ is applied (CRDs, the snapshot-controller); runs as the admin. */
  prerequisites?: (cluster: K8sCluster) => Promise<void>;
}

export interface RunningPod {
  name: string;
  run: PodRun;
  procs: Map<string, Proc>;
}

/**
 * deploy/ on a real control plane: applied server-side by kubectl as an admin would, the controller Pods' and
 * the node DaemonSet's containers started from the rendered manifests (pod-runner.ts), one node agent per fake
 * node with the Node and CSINode objects kubelet and node-driver-registrar would have made.
 */
export class K8sCluster {
  readonly root = fs.mkdtempSync(path.join(os.tmpdir(), 'dcsi-k8s-'));
  readonly tools: K8sTools = k8sTools(CONTROL_PLANE_SETS);
  readonly plane = new ControlPlane(this.tools, this.root, [serviceAccount(NAMESPACE, CONTROLLER_SA)]);
  /** The admin's client. */
  api!: KubeRest;
  /** deploy/ as the API server stored it (defaults filled in). */
  /** The applied controller Deployment and node DaemonSet, as the API server returned them. */
  deployment!: V1Deployment;
  daemonSet!: V1DaemonSet;
  private readonly configMaps = new Map<string, Record<string, string>>();
  controllers: RunningPod[] = [];
  nodes = new Map<string, RunningPod>();
  private controllerArgsOverride: ((args: string[]) => string[]) | undefined;
  private readonly stopping = new Set<RunningPod>();

  get logDir(): string {
    return this.plane.logDir;
  }

  /** Processes of the cluster that are no Pod of deploy/ (the snapshot-controller): stopped before the plane. */
  readonly clusterProcs: Proc[] = [];

  async start(nodeNames: string[], options: ClusterOptions = {}): Promise<void> {
    await this.plane.start(KUBE_CONTROLLERS);
    this.api = this.plane.rest();
    await options.prerequisites?.(this);
    // deploy/base as shipped, with the one component a development node needs: its pool is a directory without
    // project quotas (the real node's overlay has it too), and the components the test asks for.
    const overlay = this.writeOverlay('deploy-overlay', ['dir-quota-none', ...(options.components ?? [])]);
    this.kubectl(['apply', '--server-side', '--field-manager=e2e-admin', '-k', overlay]);
    const apps = `/apis/apps/v1/namespaces/${NAMESPACE}`;
    this.deployment = await this.api.get<V1Deployment>(`${apps}/deployments/durable-csi-controller`);
    this.daemonSet = await this.api.get<V1DaemonSet>(`${apps}/daemonsets/durable-csi-node`);
    const configMap = await this.api.get<V1ConfigMap>(
      `/api/v1/namespaces/${NAMESPACE}/configmaps/durable-csi-temporal`,
    );
    this.configMaps.set('durable-csi-temporal', configMap.data ?? {});
    for (const name of nodeNames) await this.startNode(name);
    await this.startControllers();
  }

  /**
   * An overlay of deploy/base with the named components (deploy/components/<name>), written under the run
   * directory as an admin's own would be.
   */
  writeOverlay(name: string, components: string[]): string {
    const dir = path.join(this.root, name);
    fs.mkdirSync(dir, { recursive: true });
    const relative = (sub: string) => path.relative(dir, this.deployDir(sub));
    const lines = ['apiVersion: kustomize.config.k8s.io/v1beta1', 'kind: Kustomization', 'resources:'];
    lines.push(
      `  - ${relative('base')}`,
      'components:',
      ...components.map((c) => `  - ${relative(`components/${c}`)}`),
    );
    fs.writeFileSync(path.join(dir, 'kustomization.yaml'), `${lines.join('\n')}\n`);
    return dir;
  }

  deployDir(sub: string): string {
    return path.join(findProjectRoot(), 'deploy', sub);
  }

  kubectl(args: string[]): string {
    try {
      return execFileSync(this.tools.kubectl, [`--kubeconfig=${this.plane.adminKubeconfig()}`, ...args], {
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'pipe'],
      });
    } catch (error) {
      const stderr = (error as { stderr?: string }).stderr ?? '';
      throw new Error(`kubectl ${args.join(' ')} failed: ${stderr || String(error)}`);
    }
  }

  controllerKubeconfig(): string {
    return this.plane.writeKubeconfig(serviceAccount(NAMESPACE, CONTROLLER_SA).user, CONTROLLER_SA);
  }

  /** The controller Deployment's Pods, made by the ReplicaSet controller from the applied manifest. */
  private async controllerPodNames(): Promise<string[]> {
    const replicas = this.deployment.spec?.replicas ?? 1;
    return eventually(
      'controller Deployment Pods',
      async () => {
        const pods = await this.api.get<V1PodList>(
          `/api/v1/namespaces/${NAMESPACE}/pods?labelSelector=app.kubernetes.io/component%3Dcontroller`,
        );
        const names = pods.items.map((pod) => pod.metadata?.name ?? '').sort();
        return names.length === replicas ? names : undefined;
      },
      30_000,
    );
  }

  async startControllers(override?: (args: string[]) => string[]): Promise<void> {
    this.controllerArgsOverride = override;
    const names = await this.controllerPodNames();
    for (const podName of names) {
      const spec = this.deployment.spec?.template.spec;
      if (!spec) throw new Error('controller Deployment without a Pod spec');
      const run = await preparePod(spec, this.podContext(podName));
      const pod: RunningPod = { name: podName, run, procs: new Map() };
      this.controllers.push(pod);
      await this.startController(pod);
      // Every other container is a sidecar: csi-provisioner, csi-resizer, and what a component adds.
      for (const container of spec.containers)
        if (container.name !== 'durable-csi') this.startContainer(pod, container.name);
    }
  }

  /** Starts (again) the durable-csi container of a controller Pod and waits until its socket answers Probe. */
  async startController(pod: RunningPod): Promise<void> {
    const proc = this.startContainer(pod, 'durable-csi', this.controllerArgsOverride);
    await this.waitProbe(proc, this.endpointOf(pod));
  }

  async stopControllers(): Promise<void> {
    for (const pod of this.controllers) await this.stopPod(pod);
    this.controllers = [];
  }

  endpointOf(pod: RunningPod): string {
    const launch = pod.run.launches.get('durable-csi');
    const endpoint = launch?.args.find((arg) => arg.startsWith('--endpoint='))?.slice('--endpoint='.length);
    if (!endpoint) throw new Error(`${pod.name}: durable-csi has no --endpoint`);
    return endpoint;
  }

  metricsUrl(pod: RunningPod): string {
    const port = pod.run.ports.get(9464);
    if (!port) throw new Error('the controller declares no metrics port 9464');
    return `http://127.0.0.1:${port}`;
  }

  /** One node: the Node object (as kubelet registers it), the agent, then CSINode and the topology label. */
  async startNode(nodeName: string): Promise<RunningPod> {
    await this.api.create('/api/v1/nodes', {
      metadata: { name: nodeName, labels: { 'kubernetes.io/hostname': nodeName } },
    });
    const spec = this.daemonSet.spec?.template.spec;
    if (!spec) throw new Error('node DaemonSet without a Pod spec');
    const run = await preparePod(spec, {
      ...this.podContext(`durable-csi-node-${nodeName}`),
      nodeName,
      kubeconfig: undefined,
    });
    const pod: RunningPod = { name: nodeName, run, procs: new Map() };
    this.nodes.set(nodeName, pod);
    await this.startAgent(nodeName);
    await this.registerPlugin(nodeName);
    return pod;
  }

  async startAgent(nodeName: string): Promise<Proc> {
    const pod = this.node(nodeName);
    const proc = this.startContainer(pod, 'durable-csi');
    await this.waitProbe(proc, this.endpointOf(pod));
    return proc;
  }

  node(nodeName: string): RunningPod {
    const pod = this.nodes.get(nodeName);
    if (!pod) throw new Error(`no node ${nodeName}`);
    return pod;
  }

  /** What kubelet does with node-driver-registrar's registration: NodeGetInfo -> CSINode and Node labels. */
  async registerPlugin(nodeName: string): Promise<void> {
    const clients = connectCsi(this.endpointOf(this.node(nodeName)));
    try {
      const info = await call<NodeGetInfoResponse__Output>((done) =>
        clients.node.NodeGetInfo({}, withDeadline(5000), done),
      );
      const segments = info.accessible_topology?.segments ?? {};
      await this.api.patch(`/api/v1/nodes/${nodeName}`, { metadata: { labels: segments } });
      await this.api.create('/apis/storage.k8s.io/v1/csinodes', {
        metadata: { name: nodeName },
        spec: { drivers: [{ name: DRIVER, nodeID: info.node_id, topologyKeys: Object.keys(segments) }] },
      });
    } finally {
      clients.close();
    }
  }

  /** The node's pool volumes, read from disk (the driver's own answers are not trusted). */
  volumesOnDisk(nodeName: string): string[] {
    const dir = path.join(this.poolDir(nodeName), 'volumes');
    return fs.existsSync(dir) ? fs.readdirSync(dir).sort() : [];
  }

  /** The node's pool directory on the host (the DaemonSet's hostPath volume `pool`). */
  poolDir(nodeName: string): string {
    const pool = this.node(nodeName).run.volumes.get('pool');
    if (!pool) throw new Error(`${nodeName}: the node Pod has no pool volume`);
    return pool;
  }

  async stop(): Promise<void> {
    for (const pod of [...this.controllers, ...this.nodes.values()]) await this.stopPod(pod);
    for (const proc of this.clusterProcs) await proc.stop(5000);
    this.api?.close();
    await this.plane.stop();
    if (!process.env.DURABLE_CSI_KEEP_TEST_DATA) fs.rmSync(this.root, { recursive: true, force: true });
  }

  private podContext(podName: string) {
    return {
      podName,
      namespace: NAMESPACE,
      root: this.root,
      tools: this.tools,
      configMaps: this.configMaps,
      envOverrides: { TEMPORAL_ADDRESS: temporalAddress(), TEMPORAL_NAMESPACE: 'default' },
      kubeconfig: this.controllerKubeconfig(),
    };
  }

  /**
   * Starts a container. Sidecars get kubelet's restartPolicy Always: they exit when they lose the driver's socket
   * (csi-lib-utils does that on purpose) and are started again after a second. The durable-csi containers are
   * started and stopped by the test itself.
   */
  private startContainer(pod: RunningPod, container: string, override?: (args: string[]) => string[]): Proc {
    const launch = pod.run.launches.get(container);
    if (!launch) throw new Error(`${pod.name} has no container ${container}`);
    const args = override ? override(launch.args) : launch.args;
    const proc = startLaunch(`${pod.name}-${container}`, { ...launch, args }, pod.name, this.logDir);
    pod.procs.set(container, proc);
    if (container !== 'durable-csi')
      void proc.exited.then(() => {
        if (this.stopping.has(pod) || pod.procs.get(container) !== proc) return;
        setTimeout(() => {
          if (!this.stopping.has(pod) && pod.procs.get(container) === proc) this.startContainer(pod, container);
        }, 1000);
      });
    return proc;
  }

  private async stopPod(pod: RunningPod): Promise<void> {
    this.stopping.add(pod);
    for (const proc of pod.procs.values()) await proc.stop(5000);
  }

  private async waitProbe(proc: Proc, endpoint: string): Promise<void> {
    const died = proc.exited.then(() => {
      throw new Error(`${proc.name} exited with ${proc.child.signalCode ?? proc.child.exitCode}`);
    });
    died.catch(() => undefined);
    try {
      await Promise.race([waitUntilReady(endpoint, 60_000), died]);
    } catch (error) {
      throw new Error(`${proc.name} did not start: ${String(error)}\n${proc.tail()}`);
    }
  }
}
