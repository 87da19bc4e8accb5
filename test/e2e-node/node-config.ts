import path from 'node:path';
import { NodeNamespace } from './node-namespace';

/**
 * containerd 1.6 (Debian) for the node: every directory under the run directory, and the two settings this VM
 * needs (docs/kubernetes.md, "The real node"): restrict_oom_score_adj (root here lacks CAP_SYS_RESOURCE, so the
 * sandbox's oom_score_adj -998 fails every Pod) and cgroupfs (no systemd).
 */
export function containerdConfig(dir: string, cniConfDir: string, sandboxImage: string): string {
  return `version = 2
root = "${path.join(dir, 'root')}"
state = "${path.join(dir, 'state')}"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs"]
[grpc]
  address = "${containerdSocket(dir)}"
[ttrpc]
  address = "${path.join(dir, 'containerd.sock.ttrpc')}"
[plugins."io.containerd.internal.v1.opt"]
  path = "${path.join(dir, 'opt')}"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "${sandboxImage}"
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "${path.join(dir, 'runc')}"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "${cniConfDir}"
`;
}

export function containerdSocket(dir: string): string {
  return path.join(dir, 'containerd.sock');
}

/**
 * A bridge with the gateway's address on the node but no default route: Pods reach the node's own addresses (the
 * API server on the `kubernetes` ClusterIP, the Temporal forwarder) and each other, nothing else. No masquerade.
 */
export function cniConfig(ipamDir: string, podNet: string): string {
  return JSON.stringify(
    {
      cniVersion: '0.4.0',
      name: 'dcsi-pods',
      plugins: [
        {
          type: 'bridge',
          bridge: 'dcsi-br0',
          isGateway: true,
          isDefaultGateway: false,
          ipMasq: false,
          hairpinMode: true,
          ipam: {
            type: 'host-local',
            ranges: [[{ subnet: podNet }]],
            routes: NodeNamespace.podRoutes(),
            dataDir: ipamDir,
          },
        },
      ],
    },
    null,
    2,
  );
}

/**
 * kubelet 1.37 on this VM: cgroup v1 allowed, cgroupfs, no swap check, eviction off, images never collected. Its Pods'
 * cgroups under `cgroupRoot` (node-cgroups.ts): the node's own, so that nodes on one machine never share them.
 */
export function kubeletConfig(options: {
  containerdDir: string;
  podLogsDir: string;
  caFile: string;
  nodeIp: string;
  cgroupRoot: string;
  nodeLeaseDurationSeconds?: number;
  /** CSIVolumeHealth on (alpha), kubelet probing the health RPCs every 2 s: ClusterOptions.volumeHealth. */
  volumeHealth?: boolean;
}): string {
  return JSON.stringify(
    {
      apiVersion: 'kubelet.config.k8s.io/v1beta1',
      kind: 'KubeletConfiguration',
      failCgroupV1: false,
      cgroupDriver: 'cgroupfs',
      failSwapOn: false,
      containerRuntimeEndpoint: `unix://${containerdSocket(options.containerdDir)}`,
      podLogsDir: options.podLogsDir,
      address: options.nodeIp,
      cgroupRoot: options.cgroupRoot,
      healthzBindAddress: '127.0.0.1',
      readOnlyPort: 0,
      // The API server dials kubelet for logs and exec; kubelet serves it without client certificates here.
      authentication: { anonymous: { enabled: true }, webhook: { enabled: false }, x509: { clientCAFile: '' } },
      authorization: { mode: 'AlwaysAllow' },
      clusterDomain: 'cluster.local',
      resolvConf: '',
      evictionHard: { 'memory.available': '1Mi', 'nodefs.available': '1%', 'imagefs.available': '1%' },
      // Imported images cannot be pulled again: never collect them.
      imageGCHighThresholdPercent: 100,
      imageGCLowThresholdPercent: 99,
      // Pods start and stop fast enough for a test: status and volume sync every second.
      syncFrequency: '5s',
      fileCheckFrequency: '5s',
      nodeStatusUpdateFrequency: '2s',
      // Renewed every quarter of it: a node that stops is NotReady within the control plane's grace period
      // (real-cluster.ts, --node-monitor-grace-period), not after the default 40 s lease.
      ...(options.nodeLeaseDurationSeconds ? { nodeLeaseDurationSeconds: options.nodeLeaseDurationSeconds } : {}),
      serializeImagePulls: false,
      maxPods: 60,
      // kubelet 1.37's health manager probes at volumeStatsAggPeriod (1 min by default): every 2 s, a test sees a
      // condition come and go in seconds.
      ...(options.volumeHealth ? { featureGates: { CSIVolumeHealth: true }, volumeStatsAggPeriod: '2s' } : {}),
    },
    null,
    2,
  );
}
