import { probeAfterOutage, snapshotDriver } from './after-outage';
import type { Fault } from './types';
import { step } from './types';

/**
 * The Temporal server itself goes away (SIGTERM or SIGKILL) and comes back on the same database and port (with
 * `--temporal prod`, all four services). Every driver process must survive it and serve again: each is probed, and a
 * create aimed at each node must land there.
 */
export const temporalRestart: Fault = {
  kind: 'temporal-restart',
  plannedOps: (options) => options.nodes,
  async run(context, record) {
    const { prng } = context;
    const signal = prng.chance(0.5) ? 'SIGKILL' : 'SIGTERM';
    const downMs = prng.int(3000, 15_000);
    const before = snapshotDriver(context);
    step(context, record, `${signal} the Temporal server; start it again on the same database after ${downMs} ms`);
    await context.temporal.restart(signal, downMs);
    record.details = { signal, downMs, ...(await probeAfterOutage(context, record, before)) };
  },
};
