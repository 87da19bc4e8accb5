import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { startProcess, type Proc } from '../e2e-k8s/processes';

/** The node's own address, inside its network namespace only (10.213.0.0/24 exists nowhere else). */
export const NODE_IP = '10.213.0.2';
const NODE_NET = '10.213.0.0/24';
/** The `kubernetes` Service's ClusterIP (the first of --service-cluster-ip-range), local to the node. */
export const KUBERNETES_SERVICE_IP = '10.0.0.1';
const SERVICE_NET = '10.0.0.0/24';
export const POD_NET = '10.88.0.0/24';

/**
 * A network and mount namespace made by the test for its node: an interface with the node's address (and the
 * `kubernetes` ClusterIP, so in-cluster clients reach the API server without kube-proxy), no route anywhere else.
 * The mount namespace is private: /var/lib is a tmpfs there (containerd's CNI cache, pod netns pins and kubelet's
 * own files never touch the host), /var/lib/kubelet and /var/lib/durable-csi are bind mounts of the run
 * directory (deploy/'s hostPaths name them), /var/log and /run tmpfs. Everything dies with the namespace.
 */
export class NodeNamespace {
  private mntNs = '';
  /** The holder's shell: PID 1 of the node's PID namespace, as the host numbers it. */
  private initPid = 0;

  private constructor(
    readonly holder: Proc,
    readonly run: string,
  ) {}

  /** The node's init (PID 1 inside): hostPID Pods see its mount namespace as the host's (/proc/1/ns/mnt). */
  get pid(): number {
    if (!this.initPid) throw new Error('namespace holder has no pid');
    return this.initPid;
  }

  static async create(run: string, logDir: string): Promise<NodeNamespace> {
    // The holder keeps the namespaces alive; its stdin is the test: if the test dies, the holder ends. A PID
    // namespace of its own (with its /proc) makes the holder's shell the node's PID 1, as on a real node: the
    // storage suite's host-exec Pods enter the node through /proc/1/ns/mnt.
    const holder = startProcess(
      'netns-holder',
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
    const kubelet = path.join(run, 'host', 'var-lib-kubelet');
    const durable = path.join(run, 'host', 'var-lib-durable-csi');
    for (const dir of [kubelet, durable]) fs.mkdirSync(dir, { recursive: true });
    ns.sh(
      [
        'set -e',
        'ip link set lo up',
        // A veth pair with both ends inside (this kernel has no dummy driver): the node's address, nothing beyond.
        'ip link add dcsi0 type veth peer name dcsi1',
        'ip link set dcsi1 up',
        `ip addr add ${NODE_IP}/24 dev dcsi0`,
        `ip addr add ${KUBERNETES_SERVICE_IP}/32 dev dcsi0`,
        'ip link set dcsi0 up',
        'mount -t tmpfs -o mode=0755 dcsi-var-lib /var/lib',
        'mount -t tmpfs -o mode=0755 dcsi-var-log /var/log',
        // containerd 1.6 puts its shims' sockets under /run/containerd whatever its state directory.
        'mount -t tmpfs -o mode=0755 dcsi-run /run',
        'mkdir -p /var/lib/kubelet /var/lib/durable-csi',
        // Shared: the node plugin's Bidirectional mount of it needs that (containerd refuses it otherwise).
        `mount --bind ${kubelet} /var/lib/kubelet`,
        'mount --make-rshared /var/lib/kubelet',
        // Recursive: a pool filesystem of its own (RealNode's poolFilesystem) is mounted under it on the host.
        `mount --rbind ${durable} /var/lib/durable-csi`,
        // Shared like / on a systemd host: the pool's HostToContainer mount (a late disk) needs a shared or slave source.
        'mount --make-rshared /var/lib/durable-csi',
      ].join('\n'),
    );
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
      throw new Error(`in the node's namespace, ${command} ${args.join(' ')} failed: ${stderr || String(error)}`);
    }
  }

  /** The node's mount table (kubelet's and the driver's mounts live here, not on the host). */
  mountinfo(): string {
    return fs.readFileSync(`/proc/${this.pid}/mountinfo`, 'utf8');
  }

  /** Routes the Pods need: the Service range and the node's network are on the node, reached via the bridge. */
  static podRoutes(): { dst: string }[] {
    return [{ dst: SERVICE_NET }, { dst: NODE_NET }];
  }

  /** Processes that still live in the node's mount namespace (containerd's shims daemonize), but the holder. */
  processesInside(): number[] {
    const found: number[] = [];
    for (const entry of fs.readdirSync('/proc')) {
      const pid = Number(entry);
      if (!Number.isInteger(pid) || pid === this.pid || pid === this.holder.child.pid) continue;
      try {
        if (fs.readlinkSync(`/proc/${pid}/ns/mnt`) === this.mntNs) found.push(pid);
      } catch {
        // gone meanwhile
      }
    }
    return found;
  }

  /** Kills whatever is left inside, then the holder: the namespaces and every mount in them go with it. */
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
    if (Date.now() > until) throw new Error('the node namespace did not come up');
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
