import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import type net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { findProjectRoot } from '../../temporal-dev/project-root';
import { temporalAddress } from '../support/cluster';
import { ControlPlane } from '../e2e-k8s/control-plane';
import type { KubeRest } from '../e2e-k8s/kube-rest';
import { startProcess, type Proc } from '../e2e-k8s/processes';
import { applySnapshotCrds, snapshotControllerArgs } from '../e2e-k8s/snapshot-objects';
import { CONTROL_PLANE_SETS, k8sTools, type K8sTools } from '../e2e-k8s/tools';
import { forward } from './forwarder';
import { imageRef, type ImageTars } from './images';
import { processesInKubepods, kubepodsCgroups, removeKubepodsCgroups } from './node-cgroups';
import { lockRealNode, unlockRealNode } from './node-lock';
import { poolLoopDevices, type LoopDevice } from './node-loops';
import { cniConfig, containerdConfig, containerdSocket, kubeletConfig } from './node-config';
import { KUBERNETES_SERVICE_IP, NODE_IP, NodeNamespace } from './node-namespace';
import { mountPoolFilesystem, type PoolFilesystem } from '../unit/storage/mount-helpers';
import { eventually } from '../support/eventually';

/** The node's name when a file runs only one real node; files that share a Temporal run each name theirs. */
export const NODE_NAME = 'dcsi-node';
/** The test's Temporal, forwarded to the node's address: what the overlay writes into TEMPORAL_ADDRESS. */
export const NODE_TEMPORAL_ADDRESS = `${NODE_IP}:7233`;
const API_PORT = 443;
const GiB = 1024 ** 3;
const HOST_DIRS = [
  '/var/lib/kubelet',
  '/var/lib/durable-csi',
  '/var/lib/cni',
  '/var/log/pods',
  '/etc/cni',
  '/opt/cni',
  '/run/containerd',
  '/var/lib/containerd',
];
const KUBE_CONTROLLERS = [
  'persistentvolume-binder-controller',
  'persistentvolumeclaim-protection-controller',
  'persistentvolume-protection-controller',
  'deployment-controller',
  'replicaset-controller',
  'daemonset-controller',
  // Only it removes the not-ready taint a new Node registers with.
  'node-lifecycle-controller',
  // The `default` ServiceAccount of each namespace, and kube-root-ca.crt for the Pods' tokens.
  'serviceaccount-controller',
  'root-ca-certificate-publisher-controller',
  'garbage-collector-controller',
  // Kubernetes' storage suite (storage-suite/): each spec's namespace is deleted and awaited; generic ephemeral
  // volumes get their PVCs from this controller.
  'namespace-controller',
  'ephemeral-volume-controller',
];

/** A Proc that must keep running: its death fails the test with its log tail. */
interface Part {
  proc: Proc;
  critical: boolean;
}

/**
 * One real Kubernetes node, started by the test inside a network and mount namespace of its own
 * (node-namespace.ts): etcd, kube-apiserver, kube-controller-manager, kube-scheduler, containerd and kubelet.
 * deploy/ runs on it as Pods. Torn down fully by stop(); leftovers() says what is still there.
 */
export class RealNode {
  /**
   * name: the Node's name and so the agent's node ID. The test files of one jest run share one Temporal, whose
   * registry remembers each node's pool identity: a second file's fresh pool under the same name would be refused.
   */
  constructor(
    readonly name = NODE_NAME,
    /** The pool on a filesystem of its own (the host's may lack what a test needs, such as reflinks). */
    private readonly poolFilesystem?: PoolFilesystem,
  ) {}

  readonly run = fs.mkdtempSync(path.join(os.tmpdir(), 'dcsi-node-'));
  // The control plane, kubelet and sidecars only: phase 4 runs before the storage suite's binaries are built (a
  // cold machine builds them meanwhile), and its suite asks for those itself (storage-suite/run-suite.ts).
  readonly tools: K8sTools = k8sTools(CONTROL_PLANE_SETS);
  readonly timings: Record<string, number> = {};
  ns!: NodeNamespace;
  plane!: ControlPlane;
  api!: KubeRest;
  private readonly parts = new Map<string, Part>();
  private temporalBridge: net.Server | undefined;
  /** stop() has run (or begun). */
  stopped = false;
  private locked = false;
  private loopsAfterStop: LoopDevice[] = [];
  private poolDevice: string | undefined;
  /** Host directories a node would write by default, and that existed before: only new ones are leftovers. */
  private readonly hostDirsBefore = new Set(HOST_DIRS.filter((dir) => fs.existsSync(dir)));

  get logDir(): string {
    return path.join(this.run, 'logs');
  }

  /** The pool's directory as the host sees it (the DaemonSet's hostPath /var/lib/durable-csi/pool). */
  get poolDir(): string {
    return path.join(this.run, 'host', 'var-lib-durable-csi', 'pool');
  }

  async start(images: ImageTars): Promise<void> {
    lockRealNode();
    this.locked = true;
    if (kubepodsCgroups().length > 0) throw new Error(`kubelet cgroups exist already: ${kubepodsCgroups().join(', ')}`);
    await this.timed('network and mount namespace', async () => {
      // Sparse: as large as the DaemonSet's --capacity, taking on the host only what volumes write.
      if (this.poolFilesystem)
        this.poolDevice = mountPoolFilesystem(this.poolFilesystem, `${this.run}/pool.img`, this.poolDir, 100 * GiB);
      this.ns = await NodeNamespace.create(this.run, this.logDir);
    });
    const restSocket = path.join(this.run, 'apiserver.sock');
    this.spawn('apiserver-forwarder', process.execPath, [
      forwarderScript(),
      `unix:${restSocket}`,
      `tcp:127.0.0.1:${API_PORT}`,
    ]);
    this.plane = new ControlPlane(this.tools, this.run, [], {
      launch: (command, args) => this.ns.launch(command, args),
      bindAddress: '0.0.0.0',
      advertiseAddress: NODE_IP,
      apiPort: API_PORT,
      restSocket,
      // logs and exec: dial kubelet at the Node's address (there is no DNS for its name).
      apiServerArgs: ['--kubelet-preferred-address-types=InternalIP'],
      controllerManagerArgs: [`--root-ca-file=${path.join(this.run, 'control-plane', 'certs', 'apiserver.crt')}`],
    });
    await this.timed('etcd + kube-apiserver ready, kube-controller-manager started', () =>
      this.plane.start(KUBE_CONTROLLERS),
    );
    for (const proc of this.plane.processes) this.parts.set(proc.name, { proc, critical: true });
    this.api = this.plane.rest();
    const admin = this.plane.adminKubeconfig();
    this.spawn('kube-scheduler', this.tools['kube-scheduler'], [
      `--kubeconfig=${admin}`,
      '--leader-elect=false',
      '--secure-port=0',
    ]);
    await this.timed('containerd', () => this.startContainerd(imageRef(images, 'pause')));
    for (const [ref, tar] of Object.entries(images))
      await this.timed(`image import ${ref}`, async () => {
        this.ctr(['images', 'import', tar]);
      });
    await this.timed('kubelet -> Node Ready', () => this.startKubelet(admin));
    await this.bridgeTemporal();
  }

  /**
   * The cluster's snapshot prerequisites (deploy/README.md, "Snapshots"), before deploy/ is applied: the snapshot
   * CRDs, then the snapshot-controller as the admin, in the node's namespace beside the control plane.
   */
  startSnapshotController(): void {
    applySnapshotCrds((args) => this.kubectl(args), this.tools);
    this.spawn(
      'snapshot-controller',
      this.tools['snapshot-controller'],
      snapshotControllerArgs(this.plane.adminKubeconfig()),
    );
  }

  /** Runs kubectl inside the node's namespace as the admin. */
  kubectl(args: string[], input?: string): string {
    const [command, wrapped] = this.ns.launch(this.tools.kubectl, [
      `--kubeconfig=${this.plane.adminKubeconfig()}`,
      ...args,
    ]);
    try {
      return execFileSync(command, wrapped, {
        encoding: 'utf8',
        input,
        stdio: ['pipe', 'pipe', 'pipe'],
        timeout: 120_000,
      });
    } catch (error) {
      const stderr = (error as { stderr?: string }).stderr ?? '';
      throw new Error(`kubectl ${args.join(' ')} failed: ${stderr || String(error)}`);
    }
  }

  /** Throws, with the log's tail, when a part of the node has died. */
  assertRunning(): void {
    for (const [name, part] of this.parts)
      if (part.critical && !part.proc.running())
        throw new Error(
          `${name} died (${part.proc.child.signalCode ?? part.proc.child.exitCode}):\n${part.proc.tail()}`,
        );
  }

  logTails(chars = 2500): string {
    return [...this.parts.values()].map(({ proc }) => `--- ${proc.name}\n${proc.tail(chars)}`).join('\n');
  }

  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    // Without the machine's lock this node started nothing, and what follows is host-wide (kubelet's cgroups, their
    // processes): it would end another test's node.
    if (!this.locked) {
      fs.rmSync(this.run, { recursive: true, force: true });
      return;
    }
    const kubelet = this.parts.get('kubelet')?.proc;
    await kubelet?.stop(10_000);
    // The Pods' processes outlive kubelet and their shims: end them through kubelet's cgroups.
    for (let round = 0; round < 20 && processesInKubepods().length > 0; round++) {
      for (const pid of processesInKubepods()) killQuietly(pid);
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    for (const part of [...this.parts.values()].reverse()) await part.proc.stop(5000);
    await this.plane?.stop();
    await new Promise<void>((resolve) =>
      this.temporalBridge ? this.temporalBridge.close(() => resolve()) : resolve(),
    );
    this.api?.close();
    await this.ns?.destroy();
    this.detachLoopDevices();
    this.releasePoolFilesystem();
    // Read now: once the run directory is gone, a device's backing file can no longer be matched to the pool.
    this.loopsAfterStop = this.loopDevices();
    for (let round = 0; round < 20; round++) {
      try {
        removeKubepodsCgroups();
        break;
      } catch {
        await new Promise((resolve) => setTimeout(resolve, 250));
      }
    }
    if (!process.env.DURABLE_CSI_KEEP_TEST_DATA) fs.rmSync(this.run, { recursive: true, force: true });
    if (this.locked) unlockRealNode();
  }

  /** What the node left on the host after stop(): must be nothing. */
  leftovers(): string[] {
    const left: string[] = [];
    for (const entry of fs.readdirSync('/proc')) {
      if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
      try {
        const cmdline = fs.readFileSync(`/proc/${entry}/cmdline`, 'utf8').replace(/\0/g, ' ');
        if (cmdline.includes(this.run)) left.push(`process ${entry}: ${cmdline.slice(0, 200)}`);
      } catch {
        // gone meanwhile
      }
    }
    if (this.ns && fs.existsSync(`/proc/${this.ns.pid}`)) left.push(`namespace holder ${this.ns.pid}`);
    for (const line of fs.readFileSync('/proc/self/mountinfo', 'utf8').split('\n'))
      if (line.includes(this.run) || line.includes('/var/lib/kubelet')) left.push(`mount: ${line}`);
    for (const device of this.stopped ? this.loopsAfterStop : this.loopDevices())
      left.push(`loop device ${device.name} (${device['back-file']})`);
    for (const cgroup of kubepodsCgroups()) left.push(`cgroup ${cgroup}`);
    if (fs.existsSync(this.run) && !process.env.DURABLE_CSI_KEEP_TEST_DATA) left.push(`directory ${this.run}`);
    for (const dir of HOST_DIRS)
      if (fs.existsSync(dir) && !this.hostDirsBefore.has(dir)) left.push(`host directory ${dir}`);
    return left;
  }

  /** The loop devices of the node's pool (and kubelet's over them): node-loops.ts. */
  loopDevices(): LoopDevice[] {
    return poolLoopDevices(this.run, this.poolDir);
  }

  /** After the volumes' devices are detached: the pool's own filesystem, then its device. */
  private releasePoolFilesystem(): void {
    if (!this.poolDevice) return;
    for (const [command, args] of [
      ['umount', [this.poolDir]],
      ['losetup', ['--detach', this.poolDevice]],
    ] as const) {
      try {
        execFileSync(command, args);
      } catch {
        // leftovers() reports a mount or device still there
      }
    }
  }

  private detachLoopDevices(): void {
    for (const device of this.loopDevices()) {
      try {
        execFileSync('losetup', ['--detach', device.name]);
      } catch {
        // leftovers() reports it
      }
    }
  }

  private async startContainerd(sandboxImage: string): Promise<void> {
    const dir = path.join(this.run, 'containerd');
    const cniDir = path.join(this.run, 'cni', 'net.d');
    fs.mkdirSync(cniDir, { recursive: true });
    fs.writeFileSync(path.join(cniDir, '10-dcsi-pods.conflist'), cniConfig(path.join(this.run, 'cni', 'ipam')));
    fs.mkdirSync(dir, { recursive: true });
    const config = path.join(dir, 'config.toml');
    fs.writeFileSync(config, containerdConfig(dir, cniDir, sandboxImage));
    this.spawn('containerd', 'containerd', ['--config', config]);
    await this.waitFor('containerd', 'containerd answers', async () => {
      this.ctr(['version']);
      return true;
    });
  }

  private ctr(args: string[]): string {
    return execFileSync(
      'ctr',
      [`--address=${containerdSocket(path.join(this.run, 'containerd'))}`, '-n', 'k8s.io', ...args],
      {
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'pipe'],
        timeout: 300_000,
      },
    );
  }

  private async startKubelet(kubeconfig: string): Promise<void> {
    const dir = path.join(this.run, 'kubelet');
    fs.mkdirSync(dir, { recursive: true });
    const config = path.join(dir, 'config.json');
    fs.writeFileSync(
      config,
      kubeletConfig({
        containerdDir: path.join(this.run, 'containerd'),
        podLogsDir: path.join(this.run, 'pod-logs'),
        caFile: this.plane.certFile,
      }),
    );
    this.spawn('kubelet', this.tools.kubelet, [
      `--config=${config}`,
      `--kubeconfig=${kubeconfig}`,
      '--root-dir=/var/lib/kubelet',
      `--node-ip=${NODE_IP}`,
      `--hostname-override=${this.name}`,
      '--v=2',
    ]);
    await this.waitFor('kubelet', 'Node Ready', async () => {
      const node = await this.api.get<{ status?: { conditions?: { type: string; status: string }[] } }>(
        `/api/v1/nodes/${this.name}`,
      );
      return node.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True');
    });
  }

  /** The test's Temporal dev server, reached from the node at NODE_TEMPORAL_ADDRESS through a unix socket. */
  private async bridgeTemporal(): Promise<void> {
    const socket = path.join(this.run, 'temporal.sock');
    this.temporalBridge = await forward(`unix:${socket}`, `tcp:${temporalAddress()}`);
    this.spawn('temporal-forwarder', process.execPath, [
      forwarderScript(),
      `tcp:${NODE_TEMPORAL_ADDRESS}`,
      `unix:${socket}`,
    ]);
  }

  private spawn(name: string, command: string, args: string[]): Proc {
    const [wrapped, wrappedArgs] = this.ns.launch(command, args);
    const proc = startProcess(name, wrapped, wrappedArgs, { logDir: this.logDir });
    this.parts.set(name, { proc, critical: true });
    return proc;
  }

  /** Polls until ready; a part that dies meanwhile, or never gets there, fails loudly with its log. */
  private async waitFor(part: string, what: string, check: () => Promise<boolean | undefined>): Promise<void> {
    const proc = this.parts.get(part)?.proc;
    try {
      await eventually(
        `${part}: ${what}`,
        async () => {
          if (proc && !proc.running())
            throw new Error(`${part} exited (${proc.child.exitCode ?? proc.child.signalCode})`);
          return check();
        },
        90_000,
        250,
      );
    } catch (error) {
      throw new Error(`${String(error)}\n--- ${part} log:\n${proc?.tail(4000) ?? ''}`);
    }
  }

  private async timed(what: string, step: () => Promise<void>): Promise<void> {
    const started = Date.now();
    try {
      await step();
    } catch (error) {
      throw new Error(
        `starting the node failed at "${what}": ${String(error)}\n${this.parts.size ? this.logTails(1500) : ''}`,
      );
    }
    this.timings[what] = (Date.now() - started) / 1000;
  }
}

export { KUBERNETES_SERVICE_IP };

function forwarderScript(): string {
  const script = path.join(findProjectRoot(), 'dist', 'test', 'e2e-node', 'forwarder.js');
  if (!fs.existsSync(script)) throw new Error(`${script} is missing: npm run build`);
  return script;
}

function killQuietly(pid: number): void {
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    // gone meanwhile
  }
}
