import type { FaultKind, SoakOptions } from '../options';
import type { Prng } from '../prng';
import { controllerKill, controllerRollout } from './controllers';
import { forgetThenReturn } from './forget-then-return';
import { freezeThenKill } from './freeze-then-kill';
import { nodeFailpoints } from './node-failpoints';
import { nodeLongDown } from './node-long-down';
import { nodeRollout } from './node-rollout';
import { deleteThenCreate } from './delete-then-create';
import { outageNodeRestart } from './outage-node-restart';
import { recordLoss } from './record-loss';
import { temporalOutage } from './temporal-outage';
import { temporalRestart } from './temporal-restart';
import { historyRestart, matchingRestart, postgresOutage } from './temporal-services';
import type { Fault, FaultContext, FaultRecord } from './types';
import { sleep } from './types';
import { versionSkew } from './version-skew';

const FAULTS: Record<FaultKind, Fault> = {
  'version-skew': versionSkew,
  'node-rollout': nodeRollout,
  'controller-rollout': controllerRollout,
  'controller-kill': controllerKill,
  'node-failpoints': nodeFailpoints,
  'node-long-down': nodeLongDown,
  'temporal-restart': temporalRestart,
  'temporal-outage': temporalOutage,
  'record-loss': recordLoss,
  'forget-then-return': forgetThenReturn,
  'delete-then-create': deleteThenCreate,
  'history-restart': historyRestart,
  'matching-restart': matchingRestart,
  'postgres-outage': postgresOutage,
  'outage-node-restart': outageNodeRestart,
  'freeze-then-kill': freezeThenKill,
};

export interface PlannedFault {
  fault: Fault;
  round: number;
}

/** Every selected kind once per round, in a seeded order; version skew only once, first (the run starts old). */
export function planSchedule(options: SoakOptions, prng: Prng): PlannedFault[] {
  const plan: PlannedFault[] = [];
  const others = options.faults.filter((kind) => kind !== 'version-skew');
  for (let round = 1; round <= options.rounds; round++) {
    if (round === 1 && options.faults.includes('version-skew')) plan.push({ fault: FAULTS['version-skew'], round });
    for (const kind of prng.shuffle(others)) plan.push({ fault: FAULTS[kind], round });
  }
  return plan;
}

/**
 * Runs the faults one after another while the background stream runs. The stream's share of the operations is
 * spread over the phases (before the first fault, during each, after the last), so every fault window sees
 * operations in flight besides those the fault aims at what it broke.
 */
export async function runSchedule(context: FaultContext, plan: PlannedFault[]): Promise<FaultRecord[]> {
  const { workload, options } = context;
  const planned = plan.map((item) => item.fault.plannedOps(options));
  const background = Math.max(0, options.ops - planned.reduce((sum, ops) => sum + ops, 0));
  const phases = plan.length + 1;
  const share = (phase: number) => Math.round((background * phase) / phases);

  workload.allowance = share(1);
  const warmUntil = Date.now() + 60_000;
  while (workload.issued < workload.allowance && Date.now() < warmUntil) await sleep(250);

  const records: FaultRecord[] = [];
  for (const [index, { fault, round }] of plan.entries()) {
    workload.allowance = share(index + 2) + planned.slice(0, index + 1).reduce((sum, ops) => sum + ops, 0);
    const record: FaultRecord = {
      kind: fault.kind,
      round,
      startedAt: Date.now(),
      steps: [],
      details: {},
      issuedOps: [],
    };
    records.push(record);
    context.progress(
      `fault ${index + 1}/${plan.length}: ${fault.kind} (round ${round}); ${workload.issued} ops issued`,
    );
    try {
      await fault.run(context, record);
    } catch (error) {
      record.error = error instanceof Error ? (error.stack ?? error.message) : String(error);
      context.progress(`fault ${fault.kind} failed: ${record.error}`);
    }
    record.endedAt = Date.now();
  }
  workload.allowance = options.ops;
  return records;
}
