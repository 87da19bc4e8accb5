import type { V1PodList } from '@kubernetes/client-node';
import fs from 'node:fs';
import path from 'node:path';
import { KubeError } from '../e2e-k8s/kube-rest';
import { NAMESPACE } from './deployed-node';
import type { RealCluster } from './real-cluster';

/**
 * One PV whose claim was deleted during a rollout, and its volume's directory in the pool; or, with `path`, another
 * object deleted then (a VolumeSnapshotContent, named by `pv`) and its copy's directory.
 */
export interface Watched {
  pv: string;
  dir: string;
  path?: string;
  /** The node whose plugin the deletion needs (on a cluster of several); unset: any node plugin counts. */
  node?: string;
}

/** Whether the node plugin's container runs on `node` (any node when unset), as the node itself knows it. */
export type PluginRunning = (node: string | undefined) => boolean;

/**
 * Samples, while the driver rolls, what the deletions did: when each PV went, whether its volume was still on
 * disk then (a PV removed before its volume is the false "deleted" the driver exists to prevent), and whether a
 * node plugin container was running (the deletion must wait for it).
 */
export class RolloutWatch {
  readonly violations: string[] = [];
  readonly goneAt = new Map<string, number>();
  /** Per node (or '' for any): since when a node plugin container has run, unset while none does. */
  private readonly pluginRunningSince = new Map<string, number>();
  private timer: NodeJS.Timeout | undefined;
  private sampling: Promise<void> = Promise.resolve();

  constructor(
    private readonly node: RealCluster,
    private readonly watched: Watched[],
    private readonly deletedAt: () => number | undefined,
    /**
     * How to tell a node plugin runs. By default the Pods' container statuses, which are right on a node whose
     * kubelet runs; a node that is down keeps the last status its kubelet reported, so a cluster whose nodes go down
     * asks the nodes (ClusterNode.pluginRunning).
     */
    private readonly pluginRunning?: PluginRunning,
  ) {}

  start(periodMs = 200): void {
    this.timer = setInterval(() => {
      this.sampling = this.sampling
        .then(() => this.sample())
        .catch((error: unknown) => {
          this.violations.push(`sampling failed: ${String(error)}`);
        });
    }, periodMs);
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.sampling;
  }

  /** ms from the claims' deletion to each PV gone. */
  waits(): number[] {
    const deleted = this.deletedAt() ?? 0;
    return [...this.goneAt.values()].map((at) => at - deleted);
  }

  private async sample(): Promise<void> {
    const running = this.pluginRunning ?? (await this.pluginStatuses());
    const deleted = this.deletedAt();
    if (deleted === undefined) return;
    for (const node of new Set(['', ...this.watched.flatMap((w) => w.node ?? [])])) {
      if (!running(node || undefined)) this.pluginRunningSince.delete(node);
      else if (!this.pluginRunningSince.has(node)) this.pluginRunningSince.set(node, Date.now());
    }
    for (const { pv, dir, path: objectPath, node } of this.watched) {
      if (this.goneAt.has(pv) || (await this.exists(objectPath ?? `/api/v1/persistentvolumes/${pv}`))) continue;
      this.goneAt.set(pv, Date.now());
      if (fs.existsSync(dir)) this.violations.push(`${pv} gone while its data ${path.basename(dir)} is on disk`);
      if (!this.pluginRunningSince.has(node ?? ''))
        this.violations.push(`${pv} gone while no node plugin container ran${node ? ` on ${node}` : ''}`);
    }
  }

  /** The node plugin containers running, by node, as the Pods' statuses say. */
  private async pluginStatuses(): Promise<PluginRunning> {
    const pods = await this.node.api.get<V1PodList>(
      `/api/v1/namespaces/${NAMESPACE}/pods?labelSelector=app.kubernetes.io/component%3Dnode`,
    );
    const on = new Set(
      pods.items
        .filter((pod) =>
          (pod.status?.containerStatuses ?? []).some((s) => s.name === 'durable-csi' && s.state?.running),
        )
        .map((pod) => pod.spec?.nodeName ?? ''),
    );
    return (node) => (node === undefined ? on.size > 0 : on.has(node));
  }

  private async exists(objectPath: string): Promise<boolean> {
    try {
      await this.node.api.get(objectPath);
      return true;
    } catch (error) {
      if (error instanceof KubeError && error.status === 404) return false;
      throw error;
    }
  }
}
