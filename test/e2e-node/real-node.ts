import { CLUSTER_TEMPORAL_ADDRESS, RealCluster, type ClusterNode, type ClusterOptions } from './real-cluster';
import type { NodeNamespace } from './node-namespace';
import type { LoopDevice } from './node-loops';
import type { PoolFilesystem } from '../unit/storage/mount-helpers';

export { KUBERNETES_SERVICE_IP } from './node-namespace';

/** The node's name when a file runs only one real node; files that share a Temporal run each name theirs. */
export const NODE_NAME = 'dcsi-node';
/** The test's Temporal, as the node's Pods reach it: what the overlay writes into TEMPORAL_ADDRESS. */
export const NODE_TEMPORAL_ADDRESS = CLUSTER_TEMPORAL_ADDRESS;

/**
 * One real Kubernetes node: a RealCluster (real-cluster.ts) of one node, its control plane in a namespace beside the
 * node's. deploy/ runs on it as Pods. Torn down fully by stop(); leftovers() says what is still there.
 */
export class RealNode extends RealCluster {
  /**
   * name: the Node's name and so the agent's node ID. The test files of one jest run share one Temporal, whose
   * registry remembers each node's pool identity: a second file's fresh pool under the same name would be refused.
   * poolFilesystem: the pool on a filesystem of its own (the host's may lack what a test needs, such as reflinks).
   * options.volumeHealth: the CSIVolumeHealth gate on (ClusterOptions).
   */
  constructor(
    readonly name = NODE_NAME,
    poolFilesystem?: PoolFilesystem,
    options: Pick<ClusterOptions, 'volumeHealth'> = {},
  ) {
    super({ nodes: [name], poolFilesystem, runPrefix: 'dcsi-node-', ...options });
  }

  get only(): ClusterNode {
    return this.nodes[0] as ClusterNode;
  }

  /** The node's namespaces (its mount table: kubelet's and the driver's mounts; a shell that reaches the API). */
  get ns(): NodeNamespace {
    if (!this.only.ns) throw new Error(`node ${this.name} never booted`);
    return this.only.ns;
  }

  /** The pool's directory (the DaemonSet's hostPath /var/lib/durable-csi/pool) as the test sees it. */
  get poolDir(): string {
    return this.only.poolDir;
  }

  /** The loop devices of the node's pool (and kubelet's over them): node-loops.ts. */
  loopDevices(): LoopDevice[] {
    return this.only.loopDevices();
  }
}
