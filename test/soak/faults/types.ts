import type { TemporalConfig } from '../../../temporal/config';
import type { ProdTemporal } from '../../temporal-prod/prod-temporal';
import type { Build } from '../baseline';
import type { Cluster } from '../cluster';
import type { FaultKind, SoakOptions } from '../options';
import type { Prng } from '../prng';
import type { Workload } from '../workload';

/** The Temporal server, which a fault may restart (same database, same port). */
export interface TemporalControl {
  address: string;
  /** How to connect to it (the production-style server needs its mTLS files). */
  config: TemporalConfig;
  /** Set with `--temporal prod`: its services and database, for the faults only it can show. */
  prod?: ProdTemporal;
  restart(signal: 'SIGTERM' | 'SIGKILL', downMs: number): Promise<void>;
  /** Free space per node as the registry (hence placement) sees it; for aiming faults, never for the audit. */
  availableBytes(): Promise<Map<string, number>>;
}

export interface FaultContext {
  cluster: Cluster;
  workload: Workload;
  prng: Prng;
  options: SoakOptions;
  builds: { current: Build; baseline?: Build };
  temporal: TemporalControl;
  progress(message: string): void;
}

export interface FaultRecord {
  kind: FaultKind;
  round: number;
  startedAt: number;
  endedAt?: number;
  steps: { at: string; what: string }[];
  details: Record<string, unknown>;
  /** Operations the fault issued itself (aimed at what it broke). */
  issuedOps: number[];
  error?: string;
}

export interface Fault {
  kind: FaultKind;
  /** About how many operations the fault issues itself, so the background stream leaves room for them. */
  plannedOps(options: SoakOptions): number;
  run(context: FaultContext, record: FaultRecord): Promise<void>;
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

export function step(context: FaultContext, record: FaultRecord, what: string): void {
  record.steps.push({ at: new Date().toISOString(), what });
  context.progress(`[${record.kind}] ${what}`);
}

/** Waits for some operations to end, at most timeoutMs; returns how many are still running. */
export async function awaitOps(context: FaultContext, ids: number[], timeoutMs: number): Promise<number> {
  const ops = context.workload.model.ops.filter((op) => ids.includes(op.id));
  await Promise.race([Promise.all(ops.map((op) => context.workload.done(op))), sleep(timeoutMs)]);
  return ops.filter((op) => op.endedAt === undefined).length;
}
