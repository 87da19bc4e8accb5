import { execFile, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import type net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { CLI_MAIN } from '../../agent/spawn-cli';
import { findProjectRoot } from '../../temporal-dev/project-root';
import { temporalAddress } from '../support/cluster';
import { ControlPlane } from '../e2e-k8s/control-plane';
import { KubeError, type KubeRest } from '../e2e-k8s/kube-rest';
import { startProcess, type Proc } from '../e2e-k8s/processes';
import { applySnapshotCrds, snapshotControllerArgs } from '../e2e-k8s/snapshot-objects';
import { CONTROL_PLANE_SETS, k8sTools, type K8sTools } from '../e2e-k8s/tools';
import { forward } from './forwarder';
import { imageRef, type ImageTars } from './images';
import { cgroupDirs, createCgroupRoot, processesIn, removeCgroupRoot } from './node-cgroups';
import { lockRealNode, unlockRealNode } from './node-lock';
import { poolLoopDevices, type LoopDevice } from './node-loops';
import { cniConfig, containerdConfig, containerdSocket, kubeletConfig } from './node-config';
import { CONTROL_PLANE_IP, NodeNamespace, nodeIp, podNet } from './node-namespace';
import { type PoolFilesystem } from '../unit/storage/mount-helpers';
import { eventually } from '../support/eventually';

const run_ = promisify(execFile);

/** The test's Temporal, forwarded to the control plane's address: what the overlay writes into TEMPORAL_ADDRESS. */
export const CLUSTER_TEMPORAL_ADDRESS = `${CONTROL_PLANE_IP}:7233`;
const API_PORT = 443;
const GiB = 1024 ** 3;
/** Where a node's pool lies inside its mount namespace (deploy/'s hostPath). */
const POOL_IN_NODE = '/var/lib/durable-csi/pool';
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
  // The storage suite's group snapshot specs group the claims of a StatefulSet's volumeClaimTemplates; without it
  // the StatefulSet makes no Pods and the spec times out waiting for them.
  'statefulset-controller',
  // A PodDisruptionBudget's status (its allowed disruptions), without which every eviction is refused: `kubectl
  // drain` (test/e2e-cluster) and deploy/'s own controller PDB.
  'disruption-controller',
];

/** A Proc that must keep running while its node is up: its death fails the test with its log tail. */
interface Part {
  proc: Proc;
  critical: boolean;
}

export interface ClusterOptions {
  /** One name per node (the Node's name and so the agent's node ID): the count is the cluster's size. */
  nodes: string[];
  /** Each node's pool on a filesystem of its own (the host's may lack what a test needs, such as reflinks). */
  poolFilesystem?: PoolFilesystem;
  /**
   * Seconds without a kubelet heartbeat before the control plane marks its Node NotReady; Kubernetes' defaults when
   * unset (a lease of 40 s, a grace period of 50 s). A test that stops nodes sets it low.
   */
  notReadyAfterSeconds?: number;
  /** The run directory's prefix under os.tmpdir(). */
  runPrefix?: string;
  /**
   * The CSIVolumeHealth feature gate (alpha in 1.37) on kube-apiserver and kubelet, kubelet probing every 2 s: Pod
   * status' volumeHealth and CSINode status' storageHealth are written (test/e2e-node/volume-health.test.ts).
   */
  volumeHealth?: boolean;
}

/**
 * Real Kubernetes nodes started by the test: one control plane (etcd, kube-apiserver, kube-controller-manager,
 * kube-scheduler, the snapshot-controller) in a network, mount and PID namespace of its own, and N nodes, each in
 * namespaces of its own (node-namespace.ts) with its own containerd, kubelet, kubelet directory, Pod network, cgroups
 * and pool. The nodes reach the control plane and each other's Pods through a bridge in the control plane's
 * namespace; nothing leaves the namespaces the test made. A node can be halted (kubelet and its Pods stopped),
 * resumed, powered off, rebooted or removed without touching the others (ClusterNode). deploy/ runs on it as Pods.
 * Torn down fully by stop(); leftovers() says what is still there. Clusters on one machine do not see each other
 * (the same fixed addresses, but inside each one's own namespaces; a cgroup root per run): node-lock.ts bounds how
 * many run at once.
 */
export class RealCluster {
  readonly run: string;
  // The control plane, kubelet and sidecars only: phase 4 runs before the storage suite's binaries are built (a
  // cold machine builds them meanwhile), and its suite asks for those itself (storage-suite/run-suite.ts).
  readonly tools: K8sTools = k8sTools(CONTROL_PLANE_SETS);
  readonly timings: Record<string, number> = {};
  readonly nodes: ClusterNode[];
  /** The control plane's namespace (node-namespace.ts): kubectl runs here. */
  controlNs!: NodeNamespace;
  plane!: ControlPlane;
  api!: KubeRest;
  /** stop() has run (or begun). */
  stopped = false;
  private readonly parts = new Map<string, Part>();
  private temporalBridge: net.Server | undefined;
  private locked = false;
  /** Host directories a node would write by default, and that existed before: only new ones are leftovers. */
  private readonly hostDirsBefore = new Set(HOST_DIRS.filter((dir) => fs.existsSync(dir)));

  constructor(readonly options: ClusterOptions) {
    if (options.nodes.length === 0) throw new Error('a cluster needs at least one node');
    if (new Set(options.nodes).size !== options.nodes.length) throw new Error(`node names repeat: ${options.nodes}`);
    this.run = fs.mkdtempSync(path.join(os.tmpdir(), options.runPrefix ?? 'dcsi-cluster-'));
    this.nodes = options.nodes.map((name, index) => new ClusterNode(this, index, name));
  }

  get logDir(): string {
    return path.join(this.run, 'logs');
  }

  /** Every node's cgroups lie under this one (node-cgroups.ts): unique per run, so leftovers are easy to tell. */
  get cgroupRoot(): string {
    return `/${path.basename(this.run)}`;
  }

  node(name: string): ClusterNode {
    const found = this.nodes.find((node) => node.name === name);
    if (!found) throw new Error(`no node ${name} in the cluster (${this.options.nodes.join(', ')})`);
    return found;
  }

  /** The control plane, then every node booted side by side (each imports `images` into its containerd). */
  async start(images: ImageTars): Promise<void> {
    lockRealNode();
    this.locked = true;
    await this.timed('control plane namespace', async () => {
      this.controlNs = await NodeNamespace.createControlPlane(this.run, this.logDir);
    });
    const restSocket = path.join(this.run, 'apiserver.sock');
    this.spawn('apiserver-forwarder', process.execPath, [
      forwarderScript(),
      `unix:${restSocket}`,
      `tcp:127.0.0.1:${API_PORT}`,
    ]);
    const grace = this.options.notReadyAfterSeconds;
    this.plane = new ControlPlane(this.tools, this.run, [], {
      launch: (command, args) => this.controlNs.launch(command, args),
      bindAddress: '0.0.0.0',
      advertiseAddress: CONTROL_PLANE_IP,
      // Kubeconfigs name the control plane's address on the cluster's bridge: kubelet and a kubectl inside any node
      // reach it there.
      serverAddress: CONTROL_PLANE_IP,
      apiPort: API_PORT,
      restSocket,
      // logs and exec: dial kubelet at the Node's address (there is no DNS for its name).
      apiServerArgs: [
        '--kubelet-preferred-address-types=InternalIP',
        ...(this.options.volumeHealth ? ['--feature-gates=CSIVolumeHealth=true'] : []),
      ],
      controllerManagerArgs: [
        `--root-ca-file=${path.join(this.run, 'control-plane', 'certs', 'apiserver.crt')}`,
        ...(grace ? [`--node-monitor-grace-period=${grace}s`, '--node-monitor-period=1s'] : []),
      ],
    });
    await this.timed('etcd + kube-apiserver ready, kube-controller-manager started', () =>
      this.plane.start(KUBE_CONTROLLERS),
    );
    for (const proc of this.plane.processes) this.parts.set(proc.name, { proc, critical: true });
    this.api = this.plane.rest();
    this.spawn('kube-scheduler', this.tools['kube-scheduler'], [
      `--kubeconfig=${this.plane.adminKubeconfig()}`,
      '--leader-elect=false',
      '--secure-port=0',
    ]);
    await this.bridgeTemporal();
    // Every boot settled before a failure is thrown: stop() must not power off a node that is still booting.
    const booted = await Promise.allSettled(this.nodes.map((node) => node.boot(images)));
    const failed = booted.find((result) => result.status === 'rejected');
    if (failed) throw failed.reason;
  }

  /**
   * The cluster's snapshot prerequisites (deploy/README.md, "Snapshots"), before deploy/ is applied: the snapshot
   * CRDs, then the snapshot-controller as the admin, in the control plane's namespace.
   */
  startSnapshotController(): void {
    applySnapshotCrds((args) => this.kubectl(args), this.tools);
    this.spawn(
      'snapshot-controller',
      this.tools['snapshot-controller'],
      snapshotControllerArgs(this.plane.adminKubeconfig()),
    );
  }

  /** Runs kubectl as the admin (in the control plane's namespace). */
  kubectl(args: string[], input?: string): string {
    const [command, wrapped] = this.controlNs.launch(this.tools.kubectl, [
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

  /**
   * kubectl as the admin without blocking the test (a `kubectl drain` while the test creates and deletes): its exit
   * code and its output, stdout then stderr.
   */
  async kubectlAsync(args: string[], timeoutMs = 300_000): Promise<{ code: number; output: string }> {
    const [command, wrapped] = this.controlNs.launch(this.tools.kubectl, [
      `--kubeconfig=${this.plane.adminKubeconfig()}`,
      ...args,
    ]);
    try {
      const { stdout, stderr } = await run_(command, wrapped, { encoding: 'utf8', timeout: timeoutMs });
      return { code: 0, output: `${stdout}${stderr}` };
    } catch (error) {
      const { code, stdout = '', stderr = '' } = error as { code?: number | string; stdout?: string; stderr?: string };
      return { code: typeof code === 'number' ? code : -1, output: `${stdout}${stderr}${String(error)}` };
    }
  }

  /**
   * The compiled `durable-csi` CLI run in the control plane's namespace, as an operator with kubectl's access runs it:
   * the admin's kubeconfig, the cluster's Temporal. Its exit code and what it printed.
   */
  async cli(args: string[], timeoutMs = 600_000): Promise<{ code: number; stdout: string; stderr: string }> {
    const [command, wrapped] = this.controlNs.launch(process.execPath, [
      CLI_MAIN,
      ...args,
      `--temporal-address=${CLUSTER_TEMPORAL_ADDRESS}`,
      // The test's dev server, forwarded on the control plane's bridge: plaintext, as the overlay's components say.
      '--temporal-insecure',
    ]);
    const env = { ...process.env, KUBECONFIG: this.plane.adminKubeconfig() };
    try {
      const { stdout, stderr } = await run_(command, wrapped, { encoding: 'utf8', timeout: timeoutMs, env });
      return { code: 0, stdout, stderr };
    } catch (error) {
      const { code, stdout = '', stderr = '' } = error as { code?: number | string; stdout?: string; stderr?: string };
      return {
        code: typeof code === 'number' ? code : -1,
        stdout,
        // Killed (its timeout) or not started: no exit code, and the error says why.
        stderr: `${stderr}${typeof code === 'number' ? '' : String(error)}`,
      };
    }
  }

  /** Throws, with the log's tail, when a part of the control plane or of a node that is up has died. */
  assertRunning(): void {
    const parts = [...this.parts, ...this.nodes.flatMap((node) => (node.up ? [...node.parts] : []))];
    for (const [name, part] of parts)
      if (part.critical && !part.proc.running())
        throw new Error(
          `${name} died (${part.proc.child.signalCode ?? part.proc.child.exitCode}):\n${part.proc.tail()}`,
        );
  }

  logTails(chars = 2500): string {
    const procs = [...this.parts.values(), ...this.nodes.flatMap((node) => [...node.parts.values()])];
    return procs.map(({ proc }) => `--- ${proc.name}\n${proc.tail(chars)}`).join('\n');
  }

  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    // Without the machine's lock this cluster started nothing, and what follows is host-wide (cgroups, loop
    // devices): it could end another test's node.
    if (!this.locked) {
      fs.rmSync(this.run, { recursive: true, force: true });
      return;
    }
    await Promise.all(this.nodes.map((node) => node.powerOff()));
    for (const part of [...this.parts.values()].reverse()) await part.proc.stop(5000);
    await this.plane?.stop();
    await new Promise<void>((resolve) =>
      this.temporalBridge ? this.temporalBridge.close(() => resolve()) : resolve(),
    );
    this.api?.close();
    await this.controlNs?.destroy();
    for (let round = 0; round < 20; round++) {
      try {
        removeCgroupRoot(this.cgroupRoot);
        break;
      } catch {
        await new Promise((resolve) => setTimeout(resolve, 250));
      }
    }
    if (!process.env.DURABLE_CSI_KEEP_TEST_DATA) fs.rmSync(this.run, { recursive: true, force: true });
    unlockRealNode();
  }

  /** What the cluster left on the host after stop(): must be nothing. */
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
    for (const ns of [this.controlNs, ...this.nodes.map((node) => node.ns)])
      if (ns?.alive()) left.push(`namespace holder ${ns.pid}`);
    for (const line of fs.readFileSync('/proc/self/mountinfo', 'utf8').split('\n'))
      if (line.includes(this.run) || line.includes('/var/lib/kubelet')) left.push(`mount: ${line}`);
    for (const node of this.nodes)
      for (const device of node.ns?.alive() ? node.loopDevices() : node.devicesLeft)
        left.push(`loop device ${device.name} (${device['back-file']})`);
    for (const cgroup of cgroupDirs(this.cgroupRoot)) left.push(`cgroup ${cgroup}`);
    if (fs.existsSync(this.run) && !process.env.DURABLE_CSI_KEEP_TEST_DATA) left.push(`directory ${this.run}`);
    for (const dir of HOST_DIRS)
      if (fs.existsSync(dir) && !this.hostDirsBefore.has(dir)) left.push(`host directory ${dir}`);
    return left;
  }

  /** The resident memory of every process of the cluster (control plane and nodes, Pods included), in bytes. */
  memoryBytes(): number {
    const namespaces = new Set(
      [this.controlNs, ...this.nodes.map((node) => node.ns)].flatMap((ns) => (ns?.alive() ? [ns.pidNamespace] : [])),
    );
    let total = 0;
    for (const entry of fs.readdirSync('/proc')) {
      if (!/^\d+$/.test(entry)) continue;
      try {
        const inside = namespaces.has(fs.readlinkSync(`/proc/${entry}/ns/pid`));
        const cmdline = inside ? '' : fs.readFileSync(`/proc/${entry}/cmdline`, 'utf8');
        if (!inside && !cmdline.includes(this.run)) continue;
        const rss = /^VmRSS:\s+(\d+) kB$/m.exec(fs.readFileSync(`/proc/${entry}/status`, 'utf8'));
        total += Number(rss?.[1] ?? 0) * 1024;
      } catch {
        // gone meanwhile
      }
    }
    return total;
  }

  /** The test's Temporal dev server, reached from the nodes at CLUSTER_TEMPORAL_ADDRESS through a unix socket. */
  private async bridgeTemporal(): Promise<void> {
    const socket = path.join(this.run, 'temporal.sock');
    this.temporalBridge = await forward(`unix:${socket}`, `tcp:${temporalAddress()}`);
    this.spawn('temporal-forwarder', process.execPath, [
      forwarderScript(),
      `tcp:${CLUSTER_TEMPORAL_ADDRESS}`,
      `unix:${socket}`,
    ]);
  }

  private spawn(name: string, command: string, args: string[]): Proc {
    const [wrapped, wrappedArgs] = this.controlNs.launch(command, args);
    const proc = startProcess(name, wrapped, wrappedArgs, { logDir: this.logDir });
    this.parts.set(name, { proc, critical: true });
    return proc;
  }

  /** Runs a step of the start, recorded in timings; a failure names it and carries every part's log tail. */
  async timed(what: string, step: () => Promise<void>): Promise<void> {
    const started = Date.now();
    try {
      await step();
    } catch (error) {
      throw new Error(`starting the cluster failed at "${what}": ${String(error)}\n${this.logTails(1500)}`);
    }
    this.timings[what] = (Date.now() - started) / 1000;
  }
}

/**
 * One node of a RealCluster. What a real node keeps across a reboot lies in its directory (`dir`): the kubelet
 * directory, /var/lib/durable-csi, containerd's images and the pool's disk image; the rest (its namespaces, /run,
 * every process and mount, containerd's state) goes when it powers off.
 */
export class ClusterNode {
  readonly dir: string;
  readonly ip: string;
  readonly parts = new Map<string, Part>();
  ns: NodeNamespace | undefined;
  /** kubelet runs (boot or resume); halt() and powerOff() end it. */
  up = false;
  /** The pool's loop devices still attached after the last powerOff() (must be none). */
  devicesLeft: LoopDevice[] = [];
  private poolDevice: string | undefined;
  private imagesImported = false;

  constructor(
    readonly cluster: RealCluster,
    readonly index: number,
    readonly name: string,
  ) {
    this.dir = path.join(cluster.run, 'nodes', name);
    this.ip = nodeIp(index);
  }

  /** The node's cgroups, kubelet's cgroupRoot (its Pods under kubepods/): node-cgroups.ts. */
  get cgroupRoot(): string {
    return `${this.cluster.cgroupRoot}/${this.name}`;
  }

  get logDir(): string {
    return path.join(this.cluster.logDir, this.name);
  }

  /**
   * The pool's directory (the DaemonSet's hostPath /var/lib/durable-csi/pool) as the test sees it: with a disk of its
   * own, through the node's mount namespace (the disk is mounted only there), so only while the node is powered on.
   */
  get poolDir(): string {
    if (!this.cluster.options.poolFilesystem) return path.join(this.dir, 'host', 'var-lib-durable-csi', 'pool');
    if (!this.ns?.alive()) throw new Error(`node ${this.name} is off: its pool disk is not mounted`);
    return `/proc/${this.ns.pid}/root${POOL_IN_NODE}`;
  }

  /** The node's mount table (kubelet's and the driver's mounts live here, not on the host). */
  mountinfo(): string {
    if (!this.ns) throw new Error(`node ${this.name} never booted`);
    return this.ns.mountinfo();
  }

  /**
   * Powers the node on: its namespaces, its pool disk mounted (unless `mountPoolLater`: then mountPoolDisk() does it,
   * as a data disk that comes up late), containerd (the images imported on the first boot), kubelet until the Node
   * is Ready.
   */
  async boot(images: ImageTars, options: { mountPoolLater?: boolean } = {}): Promise<void> {
    const step = (what: string, fn: () => Promise<void>) =>
      this.cluster.timed(this.cluster.nodes.length === 1 ? what : `${this.name}: ${what}`, fn);
    await step('network and mount namespace', async () => {
      // What a reboot loses: containerd's state and the Pods' addresses (/run and /var/lib/cni on a real node).
      for (const gone of ['containerd/state', 'cni/ipam'])
        fs.rmSync(path.join(this.dir, gone), { recursive: true, force: true });
      createCgroupRoot(this.cgroupRoot);
      this.ns = await NodeNamespace.createNode(
        this.dir,
        this.logDir,
        path.join(this.dir, 'host'),
        this.index,
        this.cluster.controlNs,
      );
      if (!options.mountPoolLater) this.mountPoolDisk();
    });
    await step('containerd', () => this.startContainerd(imageRef(images, 'pause')));
    if (!this.imagesImported) {
      // Side by side with the other nodes' imports (RealCluster.start): each unpacks into its own containerd.
      for (const [ref, tar] of Object.entries(images))
        await step(`image import ${ref}`, async () => {
          await this.ctrAsync(['images', 'import', tar]);
        });
      this.imagesImported = true;
    }
    await step('kubelet -> Node Ready', () => this.startKubelet());
  }

  /** The pool's disk (a sparse image of the node, made and formatted on first use) attached and mounted. */
  mountPoolDisk(): void {
    const kind = this.cluster.options.poolFilesystem;
    if (!kind || !this.ns) return;
    const image = path.join(this.dir, 'pool.img');
    const fresh = !fs.existsSync(image);
    if (fresh) {
      // Sparse: as large as the DaemonSet's --capacity, taking on the host only what volumes write.
      fs.writeFileSync(image, '');
      fs.truncateSync(image, 100 * GiB);
    }
    this.poolDevice = execFileSync('losetup', ['-f', '--show', image], { encoding: 'utf8' }).trim();
    if (fresh)
      execFileSync(
        ...((kind === 'xfs-reflink'
          ? ['mkfs.xfs', ['-q', '-f', '-m', 'reflink=1', this.poolDevice]]
          : ['mkfs.ext4', ['-q', '-F', this.poolDevice]]) as [string, string[]]),
      );
    this.ns.exec('mount', [this.poolDevice, POOL_IN_NODE]);
    if (fresh) this.ns.exec('rm', ['-rf', `${POOL_IN_NODE}/lost+found`]);
  }

  /**
   * The node lost, its disk and namespaces kept: kubelet stopped, then every Pod's processes (the node plugin's
   * included) killed through the node's cgroups. containerd keeps running; resume() brings kubelet back, which
   * restarts the Pods. The Node turns NotReady once its lease runs out (ClusterOptions.notReadyAfterSeconds).
   */
  async halt(): Promise<void> {
    this.up = false;
    await this.parts.get(`${this.name}/kubelet`)?.proc.stop(10_000);
    await this.killPods();
  }

  /** kubelet again after halt(), until the Node is Ready. */
  async resume(): Promise<void> {
    await this.startKubelet();
  }

  /**
   * Everything of the node ends at once, as at a power cut: kubelet, the Pods, containerd and its shims, the
   * namespaces with every mount and interface in them; then the pool's volume devices and its disk's are detached and
   * its cgroups removed. Its directory (kubelet's, the pool's disk image, containerd's images) stays for boot().
   */
  async powerOff(): Promise<void> {
    this.up = false;
    if (!this.ns) return;
    // The pool's volume devices are matched through the pool's files, readable only while the namespace lives.
    const devices = this.loopDevices();
    for (const part of this.parts.values()) await part.proc.kill('SIGKILL');
    await this.killPods();
    await this.ns.destroy();
    // Only a device still backed by the file it was listed with: one detached while mounted went with the namespace's
    // mounts, and its number may already be another lane's device (test/unit/storage/mount-helpers.ts).
    for (const device of devices) if (stillAttached(device)) detachQuietly(device.name);
    if (this.poolDevice) detachQuietly(this.poolDevice);
    // Read now: once the node's directory is gone, a device's backing file can no longer be matched to the pool.
    const attached = new Set(poolLoopDevices(`${this.dir}/`, '/nonexistent').map((device) => device.name));
    for (const device of devices.filter((d) => stillAttached(d))) attached.add(device.name);
    this.devicesLeft = [
      ...devices,
      ...(this.poolDevice ? [{ name: this.poolDevice, 'back-file': 'pool.img', backing: '', kubelet: false }] : []),
    ].filter((d) => attached.has(d.name));
    this.poolDevice = undefined;
    for (let round = 0; round < 20 && cgroupDirs(this.cgroupRoot).length > 0; round++) {
      try {
        removeCgroupRoot(this.cgroupRoot);
      } catch {
        await new Promise((resolve) => setTimeout(resolve, 250));
      }
    }
    this.parts.clear();
  }

  /** powerOff() then boot(): nothing runs across it, every mount is made again. */
  async reboot(images: ImageTars, options: { mountPoolLater?: boolean } = {}): Promise<void> {
    await this.powerOff();
    await this.boot(images, options);
  }

  /**
   * Whether the node plugin's agent runs on the node, from its processes (a halted node's Pods keep the status its
   * kubelet last reported): the agent's command line is the only one with --kubelet-registration-path.
   */
  pluginRunning(): boolean {
    return this.agentProcesses('node').length > 0;
  }

  /**
   * The driver's processes in the node's Pods: its node plugin (the only command line with
   * --kubelet-registration-path) or its controller (`durable-csi controller`).
   */
  agentProcesses(role: 'node' | 'controller'): number[] {
    return processesIn(this.cgroupRoot).filter((pid) => {
      let args: string[];
      try {
        args = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
      } catch {
        return false; // gone meanwhile
      }
      const plugin = args.some((arg) => arg.startsWith('--kubelet-registration-path='));
      return role === 'node' ? plugin : !plugin && args.includes('controller') && args.includes('--kubernetes');
    });
  }

  /** SIGKILLs the driver's processes of `role` on the node (a crash: kubelet starts the container again). */
  killAgents(role: 'node' | 'controller'): number {
    const pids = this.agentProcesses(role);
    for (const pid of pids) killQuietly(pid);
    return pids.length;
  }

  /** Loop devices of the node's pool (and kubelet's over them): node-loops.ts. Empty while the node is off. */
  loopDevices(): LoopDevice[] {
    if (this.cluster.options.poolFilesystem && !this.ns?.alive()) return [];
    return poolLoopDevices(`${this.dir}/`, this.poolDir);
  }

  /** Processes in the node's Pods' cgroups, killed until none is left (they outlive kubelet and their shims). */
  private async killPods(): Promise<void> {
    for (let round = 0; round < 20 && processesIn(this.cgroupRoot).length > 0; round++) {
      for (const pid of processesIn(this.cgroupRoot)) killQuietly(pid);
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  }

  private async startContainerd(sandboxImage: string): Promise<void> {
    const dir = path.join(this.dir, 'containerd');
    const cniDir = path.join(this.dir, 'cni', 'net.d');
    fs.mkdirSync(cniDir, { recursive: true });
    fs.writeFileSync(
      path.join(cniDir, '10-dcsi-pods.conflist'),
      cniConfig(path.join(this.dir, 'cni', 'ipam'), podNet(this.index)),
    );
    fs.mkdirSync(dir, { recursive: true });
    const config = path.join(dir, 'config.toml');
    fs.writeFileSync(config, containerdConfig(dir, cniDir, sandboxImage));
    this.spawn('containerd', 'containerd', ['--config', config]);
    await this.waitFor('containerd', 'containerd answers', async () => {
      await this.ctrAsync(['version']);
      return true;
    });
  }

  private async ctrAsync(args: string[]): Promise<string> {
    const { stdout } = await run_(
      'ctr',
      [`--address=${containerdSocket(path.join(this.dir, 'containerd'))}`, '-n', 'k8s.io', ...args],
      { encoding: 'utf8', timeout: 300_000, maxBuffer: 64 * 1024 * 1024 },
    );
    return stdout;
  }

  private async startKubelet(): Promise<void> {
    const dir = path.join(this.dir, 'kubelet');
    fs.mkdirSync(dir, { recursive: true });
    const config = path.join(dir, 'config.json');
    const grace = this.cluster.options.notReadyAfterSeconds;
    fs.writeFileSync(
      config,
      kubeletConfig({
        containerdDir: path.join(this.dir, 'containerd'),
        podLogsDir: path.join(this.dir, 'pod-logs'),
        caFile: this.cluster.plane.certFile,
        nodeIp: this.ip,
        cgroupRoot: this.cgroupRoot,
        // Renewed every quarter of it: a stopped node is NotReady within the grace period, not after 40 s.
        nodeLeaseDurationSeconds: grace ? Math.max(4, Math.floor(grace / 2)) : undefined,
        volumeHealth: this.cluster.options.volumeHealth,
      }),
    );
    this.spawn('kubelet', this.cluster.tools.kubelet, [
      `--config=${config}`,
      `--kubeconfig=${this.cluster.plane.adminKubeconfig()}`,
      '--root-dir=/var/lib/kubelet',
      `--node-ip=${this.ip}`,
      `--hostname-override=${this.name}`,
      '--v=2',
    ]);
    await this.waitFor('kubelet', 'Node Ready', async () => {
      const node = await this.cluster.api.get<{ status?: { conditions?: { type: string; status: string }[] } }>(
        `/api/v1/nodes/${this.name}`,
      );
      return node.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True');
    });
    this.up = true;
  }

  /** Whether the Node is Ready, as the control plane says (404: not registered, or deleted). */
  async ready(): Promise<boolean | undefined> {
    try {
      const node = await this.cluster.api.get<{ status?: { conditions?: { type: string; status: string }[] } }>(
        `/api/v1/nodes/${this.name}`,
      );
      return node.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True');
    } catch (error) {
      if (error instanceof KubeError && error.status === 404) return undefined;
      throw error;
    }
  }

  private spawn(name: string, command: string, args: string[]): Proc {
    if (!this.ns) throw new Error(`node ${this.name} is off`);
    const [wrapped, wrappedArgs] = this.ns.launch(command, args);
    const proc = startProcess(name, wrapped, wrappedArgs, { logDir: this.logDir });
    this.parts.set(`${this.name}/${name}`, { proc, critical: true });
    return proc;
  }

  /** Polls until ready; a part that dies meanwhile, or never gets there, fails loudly with its log. */
  private async waitFor(part: string, what: string, check: () => Promise<boolean | undefined>): Promise<void> {
    const proc = this.parts.get(`${this.name}/${part}`)?.proc;
    try {
      await eventually(
        `${this.name} ${part}: ${what}`,
        async () => {
          if (proc && !proc.running())
            throw new Error(`${part} exited (${proc.child.exitCode ?? proc.child.signalCode})`);
          return check();
        },
        90_000,
        250,
      );
    } catch (error) {
      throw new Error(`${String(error)}\n--- ${this.name} ${part} log:\n${proc?.tail(4000) ?? ''}`);
    }
  }
}

export function forwarderScript(): string {
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

/**
 * Whether a loop device still has the backing file it had (a detached one has none, or another's), by the file's
 * device and inode: its path changes when the mount it was read through goes with the node's namespace.
 */
function stillAttached(device: LoopDevice): boolean {
  try {
    const out = execFileSync('losetup', ['--noheadings', '--output', 'BACK-MAJ:MIN,BACK-INO', device.name], {
      encoding: 'utf8',
    });
    const [majorMinor, inode] = out.trim().split(/\s+/);
    return Boolean(majorMinor && inode) && `${majorMinor}/${inode}` === device.backing;
  } catch {
    return false;
  }
}

function detachQuietly(device: string): void {
  try {
    execFileSync('losetup', ['--detach', device], { stdio: 'ignore' });
  } catch {
    // leftovers() reports it
  }
}
