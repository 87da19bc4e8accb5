import fs from 'node:fs';
import path from 'node:path';
import { NAMESPACE } from '../deployed-node';
import type { RealCluster } from '../real-cluster';

/**
 * A failed run's cluster logs beside its report (`<report dir>/logs/`), copied before the cluster's teardown removes
 * its run directory and everything in it. The suite's output says which wait ran out; these say why: the control
 * plane's logs (the snapshot-controller's, kube-controller-manager's, the apiserver's), each node's kubelet and
 * containerd logs, and the Pod logs of the driver's namespace (the controller's driver and sidecars, the node plugin),
 * a restarted container's earlier logs included. CI's cold run of 2026-12-05 left only "not deleted within 5 min" for
 * a VolumeGroupSnapshotContent, and nothing to tell the snapshot-controller, csi-snapshotter and driver apart
 * (docs/storage-suite.md, "Group snapshots"). Returns the directory, and which of the driver's containers ran more
 * than once: printed with the failure, it reaches CI's output, where the kept files do not.
 */
export function keepClusterLogs(cluster: RealCluster, reportDir: string): { dir: string; restarted: string[] } {
  const kept = path.join(reportDir, 'logs');
  fs.rmSync(kept, { recursive: true, force: true });
  // The control plane's logs and, one directory per node, kubelet's and containerd's (RealCluster.logDir).
  fs.cpSync(cluster.logDir, path.join(kept, 'processes'), { recursive: true });
  const restarted: string[] = [];
  for (const node of cluster.nodes) {
    const podLogs = path.join(node.dir, 'pod-logs');
    if (!fs.existsSync(podLogs)) continue;
    // kubelet names each Pod's directory <namespace>_<pod>_<uid>; the suite's own Pods are in its output already.
    for (const pod of fs.readdirSync(podLogs).filter((name) => name.startsWith(`${NAMESPACE}_`))) {
      fs.cpSync(path.join(podLogs, pod), path.join(kept, 'pods', node.name, pod), { recursive: true });
      restarted.push(...restartsOf(path.join(podLogs, pod)).map((line) => `${node.name} ${pod.split('_')[1]} ${line}`));
    }
  }
  return { dir: kept, restarted };
}

/** Snapshot kinds whose leftovers can explain a failed deletion wait, contents first: they are cluster-scoped. */
const SNAPSHOT_KINDS = [
  'volumegroupsnapshotcontents',
  'volumesnapshotcontents',
  'volumegroupsnapshots',
  'volumesnapshots',
];

interface SnapshotObject {
  metadata: {
    name: string;
    namespace?: string;
    deletionTimestamp?: string;
    finalizers?: string[];
    annotations?: Record<string, string>;
  };
  spec?: { deletionPolicy?: string };
  status?: { error?: { message?: string } };
}

/**
 * The snapshot objects left after a failed run, each with what decides whether it can go: since when it is being
 * deleted, its policy, the finalizers that hold it, the controllers' annotations (snapshot.storage.kubernetes.io and
 * groupsnapshot.storage.kubernetes.io, e.g. `volumegroupsnapshot-being-deleted`, without which csi-snapshotter leaves a
 * group content alone), its last error, and the last csi-snapshotter lines that name it. A content not deleted within
 * the suite's wait is then told apart in CI's output: the snapshot-controller never marked it, csi-snapshotter did not
 * act on it, or the driver's call failed.
 */
export function snapshotLeftovers(cluster: RealCluster): string[] {
  const snapshotterLogs = cluster.nodes.flatMap((node) => containerLogs(node.dir, 'csi-snapshotter'));
  return SNAPSHOT_KINDS.flatMap((kind) => {
    let items: SnapshotObject[];
    try {
      items = (
        JSON.parse(cluster.kubectl(['get', kind, '--all-namespaces', '-o', 'json'])) as { items: SnapshotObject[] }
      ).items;
    } catch (error) {
      return [`${kind}: not listed (${(error as Error).message.split('\n')[0]})`];
    }
    return items.map(({ metadata, spec, status }) => {
      const name = metadata.namespace ? `${metadata.namespace}/${metadata.name}` : metadata.name;
      const marks = Object.keys(metadata.annotations ?? {}).filter((key) =>
        /snapshot\.storage\.kubernetes\.io\//.test(key),
      );
      const named = snapshotterLogs.filter((line) => line.includes(metadata.name)).slice(-3);
      return [
        `${kind} ${name}: ${metadata.deletionTimestamp ? `deleted at ${metadata.deletionTimestamp}` : 'not deleted'}`,
        spec?.deletionPolicy && `policy ${spec.deletionPolicy}`,
        `finalizers [${(metadata.finalizers ?? []).join(' ')}]`,
        `annotations [${marks.join(' ')}]`,
        status?.error?.message && `error: ${status.error.message}`,
        ...named.map((line) => `csi-snapshotter: ${line.slice(0, 300)}`),
      ]
        .filter(Boolean)
        .join('; ');
    });
  });
}

/** The lines of every run of one container in the driver's namespace on a node (kubelet's pod-logs, oldest first). */
function containerLogs(nodeDir: string, container: string): string[] {
  const podLogs = path.join(nodeDir, 'pod-logs');
  if (!fs.existsSync(podLogs)) return [];
  return fs
    .readdirSync(podLogs)
    .filter((pod) => pod.startsWith(`${NAMESPACE}_`))
    .flatMap((pod) => {
      const dir = path.join(podLogs, pod, container);
      if (!fs.existsSync(dir)) return [];
      return fs
        .readdirSync(dir)
        .filter((name) => /^\d+\.log$/.test(name))
        .sort((a, b) => parseInt(a, 10) - parseInt(b, 10))
        .flatMap((name) => fs.readFileSync(path.join(dir, name), 'utf8').split('\n'));
    });
}

/** `<container> ran N times` for each container of the Pod that was restarted during the run. */
function restartsOf(podDir: string): string[] {
  return fs
    .readdirSync(podDir, { withFileTypes: true })
    .filter((entry) => entry.isDirectory())
    .flatMap((container) => {
      // kubelet names a run's log by the container's restart count (0.log, 1.log, ...) and keeps only the last few.
      const counts = fs
        .readdirSync(path.join(podDir, container.name))
        .flatMap((name) => /^(\d+)\.log/.exec(name)?.[1] ?? [])
        .map(Number);
      const runs = Math.max(-1, ...counts) + 1;
      return runs > 1 ? [`${container.name} ran ${runs} times`] : [];
    });
}
