import type { V1DaemonSet, V1Deployment } from '@kubernetes/client-node';
import path from 'node:path';
import { writeOverlay } from './deploy-overlay';
import { imageRef, nodeImages, type ImageTars } from './images';
import { NODE_TEMPORAL_ADDRESS, RealNode } from './real-node';
import { RealCluster, type ClusterOptions } from './real-cluster';
import { Workloads } from './workloads';
import type { PoolFilesystem } from '../unit/storage/mount-helpers';
import { eventually } from '../support/eventually';

export const NAMESPACE = 'durable-csi';
export const DRIVER = 'durable-csi.io';
const APPS = `/apis/apps/v1/namespaces/${NAMESPACE}`;

/** What a test file works with once beforeAll has run. */
export interface Deployed<T extends RealCluster> {
  node: T;
  work: Workloads;
  /** The images every node imported: what a node booted again (ClusterNode.boot) needs. */
  images: ImageTars;
}
export type DeployedNode = Deployed<RealNode>;

/** How the driver gets onto the node: deploy/ through the overlay (the default), or another way (the chart). */
export type DriverInstall = (node: RealNode, images: ImageTars) => Promise<void>;

/**
 * Registers the file's beforeAll/afterAll: a real node named `name` with the snapshot CRDs and snapshot-controller,
 * deploy/base (plus shipped `components`) applied through the overlay (or `install`, the chart's way), the controller
 * Deployment and node DaemonSet Ready;
 * the pool on a `poolFilesystem` of its own when one is named; `imageSet` 'suite' loads Kubernetes' storage suite's
 * images too. afterAll stops the node and
 * prints node.timings. A start that fails stops the node and throws with every part's log tail.
 */
export function deployedNode(
  name: string,
  components: string[] = [],
  poolFilesystem?: PoolFilesystem,
  imageSet: 'node' | 'suite' = 'node',
  install?: DriverInstall,
  options: Pick<ClusterOptions, 'volumeHealth'> = {},
): DeployedNode {
  return deployedOn(new RealNode(name, poolFilesystem, options), `real node ${name}`, components, imageSet, install);
}

/**
 * The same for a cluster of several real nodes (real-cluster.ts): deploy/ through the overlay on all of them (or
 * `install`), a node Pod Ready on each; `extraImages` (such as a release's driver) imported on every node too.
 * afterAll prints the cluster's figures, its memory included.
 */
export function deployedCluster(
  options: ClusterOptions,
  how: {
    components?: string[];
    /** The images every node imports: the driver's ('node'), or those and the storage suite's ('suite'). */
    imageSet?: 'node' | 'suite';
    extraImages?: () => ImageTars;
    install?: (cluster: RealCluster, images: ImageTars) => Promise<void>;
  } = {},
): Deployed<RealCluster> {
  return deployedOn(
    new RealCluster(options),
    `real cluster of ${options.nodes.length}`,
    how.components ?? [],
    how.imageSet ?? 'node',
    how.install,
    how.extraImages,
  );
}

function deployedOn<T extends RealCluster>(
  cluster: T,
  label: string,
  components: string[],
  imageSet: 'node' | 'suite',
  install?: (node: T, images: ImageTars) => Promise<void>,
  extraImages?: () => ImageTars,
): Deployed<T> {
  const deployed = { node: cluster } as Deployed<T>;
  beforeAll(async () => {
    const { node } = deployed;
    const images = { ...nodeImages(imageSet), ...extraImages?.() };
    deployed.images = images;
    try {
      const started = Date.now();
      await node.start(images);
      node.timings['cluster started (control plane, every node Ready)'] = (Date.now() - started) / 1000;
      deployed.work = new Workloads(node, imageRef(images, 'library/busybox'));
      const applied = Date.now();
      node.startSnapshotController();
      if (install) await install(node, images);
      else {
        const overlay = writeOverlay(path.join(node.run, 'overlay'), images, NODE_TEMPORAL_ADDRESS, components);
        node.kubectl(['apply', '--server-side', '-k', overlay]);
      }
      await driverReady(node);
      node.timings['deploy/ applied -> controller and node Pods Ready'] = (Date.now() - applied) / 1000;
      node.timings['memory with the driver Ready (MiB)'] = Math.round(node.memoryBytes() / 2 ** 20);
    } catch (error) {
      const tails = node.logTails();
      await node.stop();
      throw new Error(`${String(error)}\n${tails}`);
    }
  }, 600_000);
  afterEach(async () => {
    if (deployed.work && !deployed.node.stopped) await deployed.work.cleanUp();
  }, 180_000);
  afterAll(async () => {
    await deployed.node.stop();
    console.log(`${label} figures (s):\n${JSON.stringify(deployed.node.timings, null, 2)}`);
  }, 120_000);
  return deployed;
}

/**
 * Both controller replicas and a node Pod on every node Ready and up to date; on timeout, the Pods described and
 * logged.
 */
export async function driverReady(node: RealCluster, timeoutMs = 240_000): Promise<void> {
  try {
    await eventually(
      'controller Deployment (2 replicas) and node DaemonSet Ready',
      async () => {
        node.assertRunning();
        const [deployment, daemonSet] = await Promise.all([controllerDeployment(node), nodeDaemonSet(node)]);
        return (
          deployment.status?.readyReplicas === 2 &&
          deployment.status.updatedReplicas === 2 &&
          (deployment.status.replicas ?? 0) === 2 &&
          deployment.status.observedGeneration === deployment.metadata?.generation &&
          daemonSet.status?.numberReady === node.nodes.length &&
          daemonSet.status.updatedNumberScheduled === node.nodes.length &&
          daemonSet.status.observedGeneration === daemonSet.metadata?.generation
        );
      },
      timeoutMs,
      1000,
    );
  } catch (error) {
    throw new Error(`${String(error)}\n${driverDiagnostics(node)}`);
  }
}

export function controllerDeployment(node: RealCluster): Promise<V1Deployment> {
  return node.api.get<V1Deployment>(`${APPS}/deployments/durable-csi-controller`);
}

export function nodeDaemonSet(node: RealCluster): Promise<V1DaemonSet> {
  return node.api.get<V1DaemonSet>(`${APPS}/daemonsets/durable-csi-node`);
}

/** The driver's Pods described and the node plugin's log: what a failed wait prints. */
export function driverDiagnostics(node: RealCluster): string {
  const run = (args: string[]) => {
    try {
      return node.kubectl(args);
    } catch (error) {
      return String(error);
    }
  };
  const described = run(['describe', 'pods', '-n', NAMESPACE]).slice(-6000);
  const logs = run(['logs', '-n', NAMESPACE, 'ds/durable-csi-node', '--all-containers', '--tail=60']).slice(-6000);
  return `${described}\n--- node plugin log:\n${logs}`;
}
