import { Command, Option } from 'commander';
import path from 'node:path';
import { armedFailpoints } from '../agent/failpoints';
import { runNodeAgent, type NodeAgentConfig } from '../agent/node-agent';
import { assertLocalEndpoint } from '../csi/endpoint';
import { BACKEND_KINDS } from '../common/backend-kinds';
import { DEFAULT_COPY_BUDGET } from '../common/copy-budget';
import { parseDuration } from '../common/duration';
import {
  DEFAULT_PRESENCE_TIMEOUT_MS,
  isValidNodeId,
  MAX_NODE_ID_LENGTH,
  MAX_PRESENCE_TIMEOUT_MS,
  MIN_PRESENCE_TIMEOUT_MS,
} from '../common/names';
import { parseQuantity } from '../common/quantity';
import { DIR_QUOTA_MODES, type DirQuotaMode } from '../storage/dir/dir-backend';
import { addMetricsOptions, addTemporalOptions, temporalConfig, type TemporalFlags } from './temporal-options';

interface NodeFlags extends TemporalFlags {
  endpoint: string;
  driverName: string;
  nodeId: string;
  backend: string;
  pool: string;
  capacity: string;
  acceptNewPool?: string;
  healthAddress?: string;
  registrationDir?: string;
  kubeletRegistrationPath?: string;
  kubeletDir: string;
  dirQuota: DirQuotaMode;
  copyMinTime: string;
  copyRate: string;
  presenceTimeout: string;
  transferPort?: string;
  transferAddress?: string;
  failpoints?: string;
}

/** A pool identity as the error, `durable-csi nodes` and pool.json show it, or the 16 hex digits a volume ID carries. */
const POOL_IDENTITY = /^([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|[0-9a-f]{16})$/i;

export function nodeCommand(defaultDriverName: string): Command {
  const command = new Command('node')
    .description("run a node agent (Identity + Node services) and the worker for this node's task queue")
    .requiredOption('--endpoint <endpoint>', 'CSI endpoint, unix:///path/node.sock or tcp://host:port')
    .requiredOption(
      '--node-id <name>',
      `this node's ID: a lower-case DNS name of at most ${MAX_NODE_ID_LENGTH} characters`,
    )
    .option('--driver-name <name>', 'CSI driver name', defaultDriverName);
  addKubeletOptions(addPoolOptions(command))
    // Test harnesses only (docs/security.md): a flag, never the environment, so a ConfigMap cannot arm it.
    .addOption(new Option('--failpoints <names>', 'kill this agent at these steps (crash tests)').hideHelp());
  return addMetricsOptions(addTemporalOptions(command)).action(async (flags: NodeFlags) => {
    const failpoints = checkNodeFlags(flags);
    await runNodeAgent(nodeAgentConfig(flags, failpoints));
  });
}

/** The pool: its backend, directory, capacity, quota mode, and the operator's word that an old one is gone. */
function addPoolOptions(command: Command): Command {
  return command
    .addOption(
      new Option(
        '--backend <kind>',
        'storage backend: dir (a directory per volume) or loop (a preallocated image per volume, attached as a loop device; needs root)',
      )
        .choices(BACKEND_KINDS)
        .default('dir'),
    )
    .requiredOption('--pool <dir>', 'pool directory holding the volumes')
    .option('--capacity <size>', 'pool capacity, e.g. 10Gi', '10Gi')
    .addOption(
      new Option(
        '--dir-quota <mode>',
        "dir backend only (the loop backend ignores it): project enforces each volume's size with a project quota " +
          "and runs no storage work (kubelet is served, the agent not ready) until the pool's filesystem is XFS or " +
          'ext4 mounted with prjquota; none only ' +
          'reserves sizes, a volume can fill the filesystem (development)',
      )
        .choices(DIR_QUOTA_MODES)
        .default('project'),
    )
    .option(
      '--copy-min-time <duration>',
      'each copy (snapshot, restore, clone) may take this long plus its size at --copy-rate; one that takes longer ' +
        'is stopped and tried again (docs/snapshots.md)',
      `${DEFAULT_COPY_BUDGET.floorMs / 60_000}m`,
    )
    .option(
      '--copy-rate <size>',
      "the copy rate per second the pool's disk sustains at the least, for a copy without reflinks",
      `${DEFAULT_COPY_BUDGET.bytesPerSecond / 1024 ** 2}Mi`,
    )
    .option(
      '--transfer-port <port>',
      'serve node-to-node copies of volumes being moved on this TCP port (TLS with a per-move key, docs/security.md); ' +
        'without it no volume moves to or from this node; 0 picks a free port',
    )
    .option(
      '--transfer-address <host>',
      'the address other nodes reach this node at, listened on and published in its record (with --transfer-port)',
    )
    .option(
      '--accept-new-pool <pool-id>',
      "the operator's decision that the pool the node's record remembers (this identity) is gone for good: the " +
        'agent may make a new pool on an empty --pool directory, or serve the other pool found there (docs/operations.md)',
    );
}

/** What kubelet sees of the agent: its probes, its registration, and the directory its paths must lie in. */
function addKubeletOptions(command: Command): Command {
  return command
    .option(
      '--health-address <host:port>',
      "serve the Pod's probes: /healthz (liveness: CSI answers), /readyz (Temporal reached, kubelet registered us)",
    )
    .option('--registration-dir <dir>', 'register with kubelet: its plugins_registry directory as mounted here')
    .option('--kubelet-registration-path <path>', 'the CSI socket as kubelet sees it (with --registration-dir)')
    .option(
      '--presence-timeout <duration>',
      `a node whose agent stops heartbeating shows offline after this long (${MIN_PRESENCE_TIMEOUT_MS / 1000}s to ` +
        `${MAX_PRESENCE_TIMEOUT_MS / 60_000}m); the agent heartbeats about every timeout minus a sixth of it, so a ` +
        'longer one costs Temporal fewer heartbeats (docs/scale.md)',
      `${DEFAULT_PRESENCE_TIMEOUT_MS / 1000}s`,
    )
    .option(
      '--kubelet-dir <dir>',
      "kubelet's root directory: staging and target paths must resolve inside it (after .. and symbolic links)",
      '/var/lib/kubelet',
    );
}

function presenceTimeoutOf(flags: NodeFlags): number {
  const ms = parseDuration(flags.presenceTimeout);
  if (ms < MIN_PRESENCE_TIMEOUT_MS || ms > MAX_PRESENCE_TIMEOUT_MS)
    throw new Error(
      `--presence-timeout "${flags.presenceTimeout}" must be between ${MIN_PRESENCE_TIMEOUT_MS / 1000}s and ` +
        `${MAX_PRESENCE_TIMEOUT_MS / 60_000}m: shorter, a heartbeat delayed by a busy agent shows a live node ` +
        'offline; longer, a dead node stays shown live (and offered to creates) for that long',
    );
  return ms;
}

function copyBudgetOf(flags: NodeFlags): { floorMs: number; bytesPerSecond: number } {
  const bytesPerSecond = parseQuantity(flags.copyRate);
  if (bytesPerSecond <= 0) throw new Error(`--copy-rate "${flags.copyRate}" must be more than 0 bytes (per second)`);
  return { floorMs: parseDuration(flags.copyMinTime), bytesPerSecond };
}

/** Refuses flags that cannot work together, in the order they are checked; returns the armed failpoints. */
function checkNodeFlags(flags: NodeFlags): ReturnType<typeof armedFailpoints> {
  if (!isValidNodeId(flags.nodeId)) {
    throw new Error(
      `--node-id "${flags.nodeId}" must be a lower-case DNS name ([a-z0-9.-]) of at most ${MAX_NODE_ID_LENGTH} characters`,
    );
  }
  if (flags.acceptNewPool !== undefined && !POOL_IDENTITY.test(flags.acceptNewPool)) {
    throw new Error(
      `--accept-new-pool "${flags.acceptNewPool}" must be a pool identity (a UUID) or the 16 hex digits of one`,
    );
  }
  assertLocalEndpoint(flags.endpoint, 'the Node service');
  presenceTimeoutOf(flags);
  if (!path.isAbsolute(flags.kubeletDir))
    throw new Error(`--kubelet-dir "${flags.kubeletDir}" must be an absolute path`);
  transferOf(flags);
  const failpoints = armedFailpoints(flags.failpoints);
  if (!flags.registrationDir !== !flags.kubeletRegistrationPath)
    throw new Error('--registration-dir and --kubelet-registration-path go together (the socket kubelet dials)');
  return failpoints;
}

/** --transfer-port and --transfer-address go together: a source must be reachable at what its record publishes. */
function transferOf(flags: NodeFlags): { host: string; port: number } | undefined {
  if (flags.transferPort === undefined && flags.transferAddress === undefined) return undefined;
  if (flags.transferPort === undefined || !flags.transferAddress)
    throw new Error('--transfer-port and --transfer-address go together (where other nodes reach this one)');
  const port = Number(flags.transferPort);
  if (!/^\d+$/.test(flags.transferPort) || port > 65535)
    throw new Error(`--transfer-port "${flags.transferPort}" must be a TCP port (0 to 65535; 0 picks one)`);
  if (!/^[A-Za-z0-9.:-]+$/.test(flags.transferAddress))
    throw new Error(`--transfer-address "${flags.transferAddress}" must be a host name or an IP address`);
  return { host: flags.transferAddress, port };
}

function nodeAgentConfig(flags: NodeFlags, failpoints: ReturnType<typeof armedFailpoints>): NodeAgentConfig {
  return {
    endpoint: flags.endpoint,
    driverName: flags.driverName,
    nodeId: flags.nodeId,
    backend: {
      kind: flags.backend,
      pool: flags.pool,
      capacityBytes: parseQuantity(flags.capacity),
      dirQuota: flags.dirQuota,
      copyBudget: copyBudgetOf(flags),
    },
    temporal: temporalConfig(flags),
    kubeletDir: flags.kubeletDir,
    failpoints,
    acceptNewPool: flags.acceptNewPool,
    presenceTimeoutMs: presenceTimeoutOf(flags),
    transfer: transferOf(flags),
    metricsAddress: flags.metricsAddress,
    sdkMetricsAddress: flags.sdkMetricsAddress,
    healthAddress: flags.healthAddress,
    registration: flags.registrationDir
      ? { registrationDir: flags.registrationDir, kubeletEndpoint: flags.kubeletRegistrationPath ?? '' }
      : undefined,
  };
}
