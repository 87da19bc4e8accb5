import type { ChildProcess } from 'node:child_process';
import { Client, type Connection } from '@temporalio/client';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawnCli, stopChild } from '../../agent/spawn-cli';
import { waitUntilReady } from '../../agent/wait-ready';
import { call, connectCsi, withDeadline, type CsiClients } from '../../csi/client';
import type { ProbeResponse__Output } from '../../csi/generated/csi/v1/ProbeResponse';
import { NODE_MEMO_KEY, nodeRecordWorkflowId, type NodeRecordMemo } from '../../common/names';
import { readNodeRecord } from '../../node-records/reads';
import { DEV_NODE_FLAGS } from '../../agent/dev-node-flags';
import { eventually } from './eventually';
import { connectTestTemporal, testTemporalConfig, testTemporalFlags } from './test-temporal';

/** Every test agent's flags beyond the dev stack's (agent/dev-node-flags.ts). */
export const TEST_NODE_FLAGS: readonly string[] = ['--presence-timeout', '20s'];

/** The address of the Temporal server the test runs against (test-temporal.ts says which). */
export function temporalAddress(): string {
  return testTemporalConfig().address;
}

/** CSI Probe's `ready`: false while the driver cannot serve yet, undefined if it leaves the field out. */
export async function probe(clients: CsiClients, timeoutMs = 3000): Promise<boolean | undefined> {
  const answer = await call<ProbeResponse__Output>((done) => clients.identity.Probe({}, withDeadline(timeoutMs), done));
  return answer.ready?.value;
}

export interface ManagedProcess {
  endpoint: string;
  child: ChildProcess;
  /** Resolves when the process has exited, whenever that was. */
  exited: Promise<void>;
  kill(signal?: NodeJS.Signals): Promise<void>;
  stop(): Promise<void>;
}

function isRunning(process: ManagedProcess): boolean {
  return process.child.exitCode === null && process.child.signalCode === null;
}

/**
 * A driver instance made of real OS processes (controllers and node agents from dist/), real unix sockets and
 * real pool directories, sharing the test run's Temporal server under a unique driver name.
 */
export class TestCluster {
  readonly driverName: string;
  readonly root: string;
  private readonly processes: ManagedProcess[] = [];
  private readonly clients: CsiClients[] = [];
  private temporalClient?: { client: Client; connection: Connection };
  private readonly nodes = new Map<string, ManagedProcess>();
  private readonly controllers: ManagedProcess[] = [];

  /** logLevel: LOG_LEVEL of every process (debug unless told; the benchmark runs them at info, as deployed). */
  constructor(
    label: string,
    private readonly options: { logLevel?: string } = {},
  ) {
    const suffix = `${Date.now().toString(36)}${Math.floor(Math.random() * 1e6).toString(36)}`;
    this.driverName = `${label}-${suffix}.test.durable-csi.io`;
    // Short root: unix socket paths are limited to 107 bytes.
    this.root = fs.mkdtempSync(path.join(os.tmpdir(), 'dcsi-'));
  }

  pool(nodeId: string): string {
    return path.join(this.root, 'pools', nodeId);
  }

  /** What the node agents take as kubelet's directory; staging and target paths go below it. */
  kubeletDir(): string {
    const dir = path.join(this.root, 'kubelet');
    fs.mkdirSync(dir, { recursive: true });
    return dir;
  }

  log(name: string): string {
    return path.join(this.root, 'logs', `${name}.log`);
  }

  async startController(name = 'controller', extra: string[] = []): Promise<ManagedProcess> {
    const endpoint = `unix://${path.join(this.root, `${name}.sock`)}`;
    const args = ['controller', '--endpoint', endpoint, '--driver-name', this.driverName, '--call-wait', '3s'];
    const controller = await this.start(name, endpoint, [...args, ...testTemporalFlags(), ...extra]);
    this.controllers.push(controller);
    await this.untilLive([...this.nodes.entries()].filter(([, node]) => isRunning(node)).map(([nodeId]) => nodeId));
    return controller;
  }

  /**
   * A node's record (run by the controllers' workers) turns it live moments after its agent is ready; tests that
   * aim work at a node right away wait for that, as a CO's scheduler only picks nodes it sees ready.
   */
  private async untilLive(nodeIds: string[]): Promise<void> {
    if (nodeIds.length === 0) return;
    const client = await this.temporal();
    const until = Date.now() + 30_000;
    for (;;) {
      const records = await Promise.all(nodeIds.map((nodeId) => readNodeRecord(client, this.driverName, nodeId)));
      if (records.every((record) => record?.node?.live)) return;
      if (Date.now() > until) throw new Error(`nodes ${nodeIds.join(', ')} did not turn live within 30 s`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  async startNode(
    nodeId: string,
    options: {
      capacity?: string;
      env?: NodeJS.ProcessEnv;
      waitReady?: boolean;
      backend?: 'dir' | 'loop';
      /** Reach Temporal through this host:port instead (a proxy in front of the test server). */
      temporalAddress?: string;
      /** More flags for `durable-csi node`. */
      extra?: string[];
      /** Arm these failpoints (agent/failpoints.ts): the agent kills itself there. */
      failpoints?: string;
      /**
       * Run the agent in a network namespace of its own with no interface up: an address it tries beyond loopback
       * fails at once (ENETUNREACH) and no packet leaves this host. Kubelet's side is a unix socket, which any
       * namespace reaches.
       */
      ownNetwork?: boolean;
    } = {},
  ): Promise<ManagedProcess> {
    const endpoint = `unix://${path.join(this.root, `${nodeId}.sock`)}`;
    const args = ['node', '--endpoint', endpoint, '--node-id', nodeId, '--driver-name', this.driverName];
    const backend = options.backend ?? 'dir';
    args.push('--backend', backend, '--pool', this.pool(nodeId), '--capacity', options.capacity ?? '10Gi');
    const temporalFlags = testTemporalFlags();
    if (options.temporalAddress)
      temporalFlags[temporalFlags.indexOf('--temporal-address') + 1] = options.temporalAddress;
    // Flags in `extra` come later and win (a test of --dir-quota=project). The shortest presence timeout: a test
    // that kills an agent sees its node offline within 20 s instead of the default 60.
    args.push(...temporalFlags, ...DEV_NODE_FLAGS, ...TEST_NODE_FLAGS, ...(options.extra ?? []));
    // kubelet's directory as the tests lay it out (test/integration/node-helpers.ts kubeletPaths).
    if (!args.includes('--kubelet-dir')) args.push('--kubelet-dir', this.kubeletDir());
    if (options.failpoints) args.push('--failpoints', options.failpoints);
    const waitReady = options.waitReady ?? true;
    const launcher = options.ownNetwork ? ['unshare', '--net', '--'] : [];
    const node = await this.start(nodeId, endpoint, args, { ...process.env, ...options.env }, waitReady, launcher);
    this.nodes.set(nodeId, node);
    // Records turn live only while a controller runs them.
    if (waitReady && this.controllers.some(isRunning)) await this.untilLive([nodeId]);
    return node;
  }

  csi(endpoint: string): CsiClients {
    const clients = connectCsi(endpoint);
    this.clients.push(clients);
    return clients;
  }

  /**
   * Until a stopped node is offline as its own record sees it, not only as a read sees it: a read says offline once
   * the presence activity is no longer running (its heartbeat timed out), the record workflow a workflow task later,
   * and only then does it accept a forget ("is live" before that, as a loaded machine showed once).
   */
  async untilOffline(nodeId: string, timeoutMs = 60_000): Promise<void> {
    const client = await this.temporal();
    const record = client.workflow.getHandle(nodeRecordWorkflowId(this.driverName, nodeId));
    await eventually(
      `${nodeId} offline in its record`,
      async () =>
        (await readNodeRecord(client, this.driverName, nodeId))?.node?.live === false &&
        ((await record.describe()).memo?.[NODE_MEMO_KEY] as NodeRecordMemo | undefined)?.live === false,
      timeoutMs,
    );
  }

  async temporal(): Promise<Client> {
    if (!this.temporalClient) {
      const connection = await connectTestTemporal();
      this.temporalClient = {
        connection,
        client: new Client({ connection, namespace: testTemporalConfig().namespace }),
      };
    }
    return this.temporalClient.client;
  }

  /** Volume keys on disk in a node's pool, read directly: the driver's own answers are not trusted. */
  volumesOnDisk(nodeId: string): string[] {
    const dir = path.join(this.pool(nodeId), 'volumes');
    return fs.existsSync(dir) ? fs.readdirSync(dir).sort() : [];
  }

  /** Every entry under a pool, for "nothing created" checks. */
  poolEntries(nodeId: string): string[] {
    const root = this.pool(nodeId);
    if (!fs.existsSync(root)) return [];
    return (fs.readdirSync(root, { recursive: true }) as string[]).filter((entry) => entry !== '.lock').sort();
  }

  async teardown(): Promise<void> {
    for (const clients of this.clients) clients.close();
    await Promise.all(this.processes.map((process) => process.stop()));
    await this.temporalClient?.connection.close();
    if (!process.env.DURABLE_CSI_KEEP_TEST_DATA) fs.rmSync(this.root, { recursive: true, force: true });
  }

  private async start(
    name: string,
    endpoint: string,
    args: string[],
    env: NodeJS.ProcessEnv = process.env,
    waitReady = true,
    launcher: string[] = [],
  ): Promise<ManagedProcess> {
    const child = spawnCli(args, this.log(name), { ...env, LOG_LEVEL: this.options.logLevel ?? 'debug' }, [], launcher);
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    const managed: ManagedProcess = {
      endpoint,
      child,
      exited,
      kill: async (signal = 'SIGKILL') => {
        if (child.exitCode === null && child.signalCode === null) child.kill(signal);
        await exited;
      },
      stop: () => stopChild(child),
    };
    this.processes.push(managed);
    if (waitReady) {
      try {
        const died = exited.then(() => {
          throw new Error(`exited with ${child.signalCode ?? child.exitCode}`);
        });
        died.catch(() => undefined); // a later exit is the test's business, not an unhandled rejection
        await Promise.race([waitUntilReady(endpoint, 60_000), died]);
      } catch (error) {
        const log = fs.existsSync(this.log(name)) ? fs.readFileSync(this.log(name), 'utf8').slice(-3000) : '';
        throw new Error(`${name} did not start: ${String(error)}\n${log}`);
      }
    }
    return managed;
  }
}
