import { Command, InvalidArgumentError, Option } from 'commander';
import path from 'node:path';
import { parseDuration } from '../../common/duration';
import { findProjectRoot } from '../../common/project-root';
import { integer } from '../support/option-parsers';

/** Every kind of fault the schedule knows, in the order --faults lists them. */
export const FAULT_KINDS = [
  'version-skew',
  'node-rollout',
  'controller-rollout',
  'controller-kill',
  'node-failpoints',
  'node-long-down',
  'temporal-restart',
  'temporal-outage',
  'record-loss',
  'forget-then-return',
  'delete-then-create',
  'outage-node-restart',
  'freeze-then-kill',
  'history-restart',
  'matching-restart',
  'postgres-outage',
] as const;
export type FaultKind = (typeof FAULT_KINDS)[number];

/** Faults only the production-style Temporal can show (separate service processes, a database of its own). */
export const PROD_ONLY_FAULTS: readonly FaultKind[] = ['history-restart', 'matching-restart', 'postgres-outage'];

/** Faults that need root: a loop device, mounts, fsfreeze. */
export const ROOT_ONLY_FAULTS: readonly FaultKind[] = ['freeze-then-kill'];

export const isRoot = () => process.getuid?.() === 0;

/** What `--faults all` (the default) means for a server (and a user: without root, the root-only kinds are left out). */
export function faultsFor(temporal: 'dev' | 'prod', root = isRoot()): FaultKind[] {
  return FAULT_KINDS.filter(
    (kind) => (temporal === 'prod' || !PROD_ONLY_FAULTS.includes(kind)) && (root || !ROOT_ONLY_FAULTS.includes(kind)),
  );
}

/**
 * Each node agent's backend, by index: `--backend`, except that freeze-then-kill needs a staged loop volume, so with
 * `--backend dir` and that fault the last node runs the loop backend (one node: the mix on it is the same).
 */
export function nodeBackends(options: Pick<SoakOptions, 'backend' | 'nodes' | 'faults'>): string[] {
  const backends = Array.from({ length: options.nodes }, () => options.backend);
  if (options.backend !== 'loop' && options.faults.includes('freeze-then-kill')) backends[options.nodes - 1] = 'loop';
  return backends;
}

export interface SoakOptions {
  ops: number;
  concurrency: number;
  nodes: number;
  seed: number;
  backend: string;
  capacity: string;
  faults: FaultKind[];
  /** dev: the Temporal CLI's dev server; prod: the production-style server (temporal-prod/, mTLS). */
  temporal: 'dev' | 'prod';
  rounds: number;
  baseline?: string;
  recurring: number;
  callTimeoutMs: number;
  callWait: string;
  opBudgetMs: number;
  longDownMs: number;
  /** How long temporal-outage keeps the Temporal server down. */
  longOutageMs: number;
  settleTimeoutMs: number;
  report: string;
  workDir?: string;
  keep: boolean;
}

function duration(text: string): number {
  try {
    return parseDuration(text);
  } catch (error) {
    throw new InvalidArgumentError(error instanceof Error ? error.message : String(error));
  }
}

function faultList(text: string): FaultKind[] | 'all' {
  if (text === 'none') return [];
  if (text === 'all') return 'all';
  const names = text.split(',').filter(Boolean);
  const unknown = names.filter((name) => !(FAULT_KINDS as readonly string[]).includes(name));
  if (unknown.length > 0)
    throw new InvalidArgumentError(`unknown fault(s) ${unknown.join(', ')}; known: ${FAULT_KINDS.join(', ')}`);
  return FAULT_KINDS.filter((kind) => names.includes(kind));
}

type Renamed = 'callTimeoutMs' | 'opBudgetMs' | 'longDownMs' | 'longOutageMs' | 'settleTimeoutMs';
interface RawOptions extends Omit<SoakOptions, 'rounds' | 'seed' | 'faults' | Renamed> {
  faults: FaultKind[] | 'all';
  rounds?: number;
  seed?: number;
  callTimeout: number;
  opBudget: number;
  longDown: number;
  longOutage: number;
  settleTimeout: number;
}

export function parseOptions(argv: string[]): SoakOptions {
  const program = new Command('soak')
    .description('chaos and version-skew soak of a real durable-csi deployment, ending in a leak audit of every pool')
    .option('--ops <n>', 'CSI operations (CreateVolume + DeleteVolume) in total', integer(1), 200)
    .option('--concurrency <n>', 'background operations holding a slot at once', integer(1), 6)
    .option('--nodes <n>', 'node agents', integer(2), 4)
    .option('--seed <n>', 'seed of every random choice (default: random, printed)', integer(0))
    .addOption(new Option('--backend <kind>', 'node storage backend').choices(['dir', 'loop']).default('dir'))
    .option('--capacity <size>', 'pool capacity of each node', '10Gi')
    .option(
      '--faults <list>',
      `comma-separated fault kinds, "all" or "none": ${FAULT_KINDS.join(', ')} (the last ${PROD_ONLY_FAULTS.length} need --temporal prod)`,
      faultList,
      'all',
    )
    .addOption(
      new Option('--temporal <server>', 'the dev server, or the production-style one (PostgreSQL, 4 services, mTLS)')
        .choices(['dev', 'prod'])
        .default('dev'),
    )
    .option(
      '--rounds <n>',
      'times the fault schedule runs (version-skew only once); default ops/300, at least 1',
      integer(1),
    )
    .option(
      '--baseline <rev>',
      'git revision of the old build (default: the newest release in CHANGELOG.md, else merge-base of HEAD and main, or HEAD~5)',
    )
    .option('--recurring <n>', 'names created and deleted again and again', integer(0), 10)
    .option('--call-timeout <duration>', 'gRPC deadline of each CSI call', duration, 10_000)
    .option('--call-wait <duration>', "controllers' --call-wait", '3s')
    .option(
      '--op-budget <duration>',
      'how long an operation holds its slot before retrying in the background',
      duration,
      20_000,
    )
    .option('--long-down <duration>', 'how long node-long-down keeps its node down', duration, 45_000)
    .option('--long-outage <duration>', 'how long temporal-outage keeps the Temporal server down', duration, 90_000)
    .option('--settle-timeout <duration>', 'how long the end waits for every operation to finish', duration, 300_000)
    .option('--report <file>', 'JSON report', path.join(findProjectRoot(), 'test-artifacts', 'soak-report.json'))
    .option('--work-dir <dir>', 'Temporal data, pools, sockets and logs (default: a new temporary folder)')
    .option('--keep', 'keep the work folder even when the run passes', false)
    .parse(argv);
  const { callTimeout, opBudget, longDown, longOutage, settleTimeout, faults, ...raw } = program.opts<RawOptions>();
  const prodOnly = faults === 'all' ? [] : faults.filter((kind) => PROD_ONLY_FAULTS.includes(kind));
  if (raw.temporal !== 'prod' && prodOnly.length > 0)
    program.error(`error: fault(s) ${prodOnly.join(', ')} need the production-style Temporal: add --temporal prod`);
  const rootOnly = faults === 'all' ? [] : faults.filter((kind) => ROOT_ONLY_FAULTS.includes(kind));
  if (!isRoot() && rootOnly.length > 0)
    program.error(`error: fault(s) ${rootOnly.join(', ')} need root (loop devices, mounts, fsfreeze)`);
  return {
    ...raw,
    faults: faults === 'all' ? faultsFor(raw.temporal) : faults,
    callTimeoutMs: callTimeout,
    opBudgetMs: opBudget,
    longDownMs: longDown,
    longOutageMs: longOutage,
    settleTimeoutMs: settleTimeout,
    seed: raw.seed ?? Math.floor(Math.random() * 2 ** 31),
    rounds: raw.rounds ?? Math.max(1, Math.round(raw.ops / 300)),
  };
}

/** The command line that replays this run's choices. */
export function replayCommand(options: SoakOptions): string {
  const all = faultsFor(options.temporal);
  const faults =
    options.faults.length === all.length && all.every((kind) => options.faults.includes(kind))
      ? 'all'
      : options.faults.join(',') || 'none';
  const parts = [
    `npm run soak --`,
    `--seed ${options.seed}`,
    `--ops ${options.ops}`,
    `--concurrency ${options.concurrency}`,
    `--nodes ${options.nodes}`,
    `--rounds ${options.rounds}`,
    `--faults ${faults}`,
    `--backend ${options.backend}`,
  ];
  if (options.baseline) parts.push(`--baseline ${options.baseline}`);
  if (options.temporal === 'prod') parts.push('--temporal prod');
  return parts.join(' ');
}
