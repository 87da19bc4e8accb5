import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { startProcess, type Proc } from '../e2e-k8s/processes';

/**
 * The cluster's network, inside namespaces the test makes (10.213.0.0/24 and 10.88.0.0/16 exist nowhere else): the
 * control plane's namespace holds a bridge with CONTROL_PLANE_IP, each node's namespace a veth into that bridge with
 * its own address. Addresses are per namespace, so two clusters' equal addresses never meet.
 */
export const CONTROL_PLANE_IP = '10.213.0.1';
const CLUSTER_NET_PREFIX = '10.213.0';
const CLUSTER_BRIDGE = 'dcsi-cluster';
/** The `kubernetes` Service's ClusterIP (the first of --service-cluster-ip-range), an address of the control plane's. */
export const KUBERNETES_SERVICE_IP = '10.0.0.1';
const SERVICE_NET = '10.0.0.0/24';
/** Every node's Pod network lies in here, one /24 each (podNet). */
const PODS_NET = '10.88.0.0/16';
/** At most this many nodes: node addresses are .10 up, Pod networks 10.88.<index>.0/24. */
export const MAX_NODES = 200;

/** The address of node `index` (0-based) on the cluster's bridge. */
export function nodeIp(index: number): string {
  if (!Number.isInteger(index) || index < 0 || index >= MAX_NODES) throw new Error(`node index ${index} out of range`);
  return `${CLUSTER_NET_PREFIX}.${10 + index}`;
}

/** The Pod network of node `index`: its CNI bridge hands out these addresses. */
export function podNet(index: number): string {
  nodeIp(index);
  return `10.88.${index}.0/24`;
}

/**
 * A network, mount and PID namespace made by the test: the control plane's (createControlPlane) or a node's
 * (createNode). A node's mount namespace is private: /var/lib is a tmpfs there (containerd's CNI cache, pod netns
 * pins and kubelet's own files never touch the host), /var/lib/kubelet and /var/lib/durable-csi are bind mounts of the
 * node's directory (deploy/'s hostPaths name them), /var/log and /run tmpfs; its pool's disk is mounted on
 * /var/lib/durable-csi/pool when the node says so (mountPoolDisk), as a node's data disk is. Everything dies with the
 * namespace.
 */
export class NodeNamespace {
  private mntNs = '';
  /** The holder's shell: PID 1 of the namespace's PID namespace, as the host numbers it. */
  private initPid = 0;

  private constructor(
    readonly holder: Proc,
    readonly run: string,
  ) {}

  /** The namespace's init (PID 1 inside): hostPID Pods see its mount namespace as the host's (/proc/1/ns/mnt). */
  get pid(): number {
    if (!this.initPid) throw new Error('namespace holder has no pid');
    return this.initPid;
  }

  /** The PID namespace's identity (as /proc/<pid>/ns/pid reads): every process of the node, its Pods' included. */
  pidNamespace = '';

  /** The control plane's namespace: the cluster's bridge with CONTROL_PLANE_IP and the `kubernetes` ClusterIP. */
  static async createControlPlane(run: string, logDir: string): Promise<NodeNamespace> {
    const ns = await NodeNamespace.hold(run, logDir, 'control-plane-ns');
    ns.sh(
      [
        'set -e',
        'ip link set lo up',
        `ip link add ${CLUSTER_BRIDGE} type bridge`,
        `ip addr add ${CONTROL_PLANE_IP}/24 dev ${CLUSTER_BRIDGE}`,
        `ip link set ${CLUSTER_BRIDGE} up`,
        // In-cluster clients reach the API server at the ClusterIP with no kube-proxy: it is the control plane's own.
        `ip addr add ${KUBERNETES_SERVICE_IP}/32 dev lo`,
        // It routes between the nodes' Pod networks (node addresses: connect()).
        'sysctl -qw net.ipv4.ip_forward=1',
      ].join('\n'),
    );
    return ns;
  }

  /**
   * A node's namespace, its veth in the control plane's bridge at nodeIp(index), its Pod network reachable from the
   * control plane (and through it from the other nodes). `hostDir` holds what the node keeps across reboots: its
   * kubelet directory (var-lib-kubelet) and /var/lib/durable-csi (var-lib-durable-csi), whose pool/ the disk covers.
   */
  static async createNode(
    run: string,
    logDir: string,
    hostDir: string,
    index: number,
    controlPlane: NodeNamespace,
  ): Promise<NodeNamespace> {
    const ns = await NodeNamespace.hold(run, logDir, `node-ns-${index}`);
    const kubelet = path.join(hostDir, 'var-lib-kubelet');
    const durable = path.join(hostDir, 'var-lib-durable-csi');
    for (const dir of [kubelet, path.join(durable, 'pool')]) fs.mkdirSync(dir, { recursive: true });
    const peer = `dcsi-n${index}`;
    // A veth pair, one end moved into the control plane's namespace (this kernel has no dummy driver). Made with
    // only the network namespace entered: `netns <pid>` names the control plane's holder by the host's PID numbers.
    execFileSync('nsenter', [
      `--target=${ns.pid}`,
      '--net',
      '--',
      'ip',
      'link',
      'add',
      'eth0',
      'type',
      'veth',
      'peer',
      'name',
      peer,
      'netns',
      String(controlPlane.pid),
    ]);
    ns.sh(
      [
        'set -e',
        'ip link set lo up',
        `ip addr add ${nodeIp(index)}/24 dev eth0`,
        'ip link set eth0 up',
        `ip route add ${SERVICE_NET} via ${CONTROL_PLANE_IP}`,
        // Other nodes' Pods, through the control plane's namespace; this node's own Pod network is its CNI bridge's.
        `ip route add ${PODS_NET} via ${CONTROL_PLANE_IP}`,
        // Pods reach the control plane and other nodes through the node.
        'sysctl -qw net.ipv4.ip_forward=1',
        'mount -t tmpfs -o mode=0755 dcsi-var-lib /var/lib',
        'mount -t tmpfs -o mode=0755 dcsi-var-log /var/log',
        // containerd 1.6 puts its shims' sockets under /run/containerd whatever its state directory.
        'mount -t tmpfs -o mode=0755 dcsi-run /run',
        'mkdir -p /var/lib/kubelet /var/lib/durable-csi',
        // Shared: the node plugin's Bidirectional mount of it needs that (containerd refuses it otherwise).
        `mount --bind ${kubelet} /var/lib/kubelet`,
        'mount --make-rshared /var/lib/kubelet',
        `mount --rbind ${durable} /var/lib/durable-csi`,
        // Shared like / on a systemd host: the pool's HostToContainer mount (a late disk) needs a shared or slave source.
        'mount --make-rshared /var/lib/durable-csi',
      ].join('\n'),
    );
    controlPlane.sh(
      [
        'set -e',
        `ip link set ${peer} master ${CLUSTER_BRIDGE}`,
        `ip link set ${peer} up`,
        `ip route replace ${podNet(index)} via ${nodeIp(index)}`,
      ].join('\n'),
    );
    return ns;
  }

  /**
   * The holder keeps the namespaces alive; its stdin is the test: if the test dies, the holder ends. A PID namespace
   * of its own (with its /proc) makes the holder's shell the namespace's PID 1, as on a real node: the storage
   * suite's host-exec Pods enter the node through /proc/1/ns/mnt, and ending PID 1 ends every process inside.
   */
  private static async hold(run: string, logDir: string, name: string): Promise<NodeNamespace> {
    const holder = startProcess(
      name,
      'unshare',
      [
        '--net',
        '--mount',
        '--propagation',
        'private',
        '--pid',
        '--fork',
        '--kill-child',
        '--mount-proc',
        '--',
        'sh',
        '-c',
        'read _; exit 0',
      ],
      { logDir, stdin: 'pipe' },
    );
    const ns = new NodeNamespace(holder, run);
    await waitFor(() => {
      ns.initPid = childOf(holder.child.pid) ?? 0;
      return ns.initPid !== 0 && fs.readlinkSync(`/proc/${ns.initPid}/ns/net`) !== fs.readlinkSync('/proc/self/ns/net');
    });
    ns.mntNs = fs.readlinkSync(`/proc/${ns.pid}/ns/mnt`);
    ns.pidNamespace = fs.readlinkSync(`/proc/${ns.pid}/ns/pid`);
    return ns;
  }

  /** [command, args] that run inside the namespaces, killed if the test process dies. */
  launch(command: string, args: string[]): [string, string[]] {
    return [
      'nsenter',
      [
        `--target=${this.pid}`,
        '--net',
        '--mount',
        '--pid',
        '--',
        'setpriv',
        '--pdeathsig=KILL',
        '--',
        command,
        ...args,
      ],
    ];
  }

  sh(script: string): string {
    return this.exec('sh', ['-c', script]);
  }

  exec(command: string, args: string[]): string {
    const [wrapped, wrappedArgs] = this.launch(command, args);
    try {
      return execFileSync(wrapped, wrappedArgs, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
    } catch (error) {
      const stderr = (error as { stderr?: string }).stderr ?? '';
      throw new Error(`in the namespace, ${command} ${args.join(' ')} failed: ${stderr || String(error)}`);
    }
  }

  /** The namespace's mount table (kubelet's and the driver's mounts live here, not on the host). */
  mountinfo(): string {
    return fs.readFileSync(`/proc/${this.pid}/mountinfo`, 'utf8');
  }

  /** Whether the holder (and so every namespace) is still there. */
  alive(): boolean {
    return this.initPid !== 0 && fs.existsSync(`/proc/${this.initPid}`) && this.holder.running();
  }

  /** Routes the Pods need: the Service range, the cluster's network and the other nodes' Pods, via their bridge. */
  static podRoutes(): { dst: string }[] {
    return [{ dst: SERVICE_NET }, { dst: `${CLUSTER_NET_PREFIX}.0/24` }, { dst: PODS_NET }];
  }

  /** Processes that still live in the namespace's mount namespace (containerd's shims daemonize), but the holder. */
  processesInside(): number[] {
    const found: number[] = [];
    for (const entry of fs.readdirSync('/proc')) {
      const pid = Number(entry);
      if (!Number.isInteger(pid) || pid === this.initPid || pid === this.holder.child.pid) continue;
      try {
        if (fs.readlinkSync(`/proc/${pid}/ns/mnt`) === this.mntNs) found.push(pid);
      } catch {
        // gone meanwhile
      }
    }
    return found;
  }

  /**
   * Kills whatever is left inside, then the holder: the namespaces and every mount and interface in them go with it
   * (and the veth's end in the control plane's bridge). Ending PID 1 ends every process of the PID namespace, the
   * Pods' included; what sits in the mount namespace alone is killed first.
   */
  async destroy(): Promise<void> {
    for (let round = 0; round < 20; round++) {
      const left = this.processesInside();
      if (left.length === 0) break;
      for (const pid of left) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // gone meanwhile
        }
      }
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    this.holder.child.stdin?.end();
    await this.holder.stop(2000);
  }
}

/** The one child of a process (unshare --fork's), from /proc; undefined until it has one. */
function childOf(pid: number | undefined): number | undefined {
  if (!pid) return undefined;
  try {
    const children = fs.readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim();
    return children ? Number(children.split(' ')[0]) : undefined;
  } catch {
    return undefined;
  }
}

async function waitFor(check: () => boolean, timeoutMs = 5000): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > until) throw new Error('the namespace did not come up');
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
