import type { ProdTemporal } from '../../temporal-prod/prod-temporal';
import type { ServiceName } from '../../temporal-prod/server-config';
import { probeAfterOutage, snapshotDriver } from './after-outage';
import type { Fault, FaultContext, FaultRecord } from './types';
import { sleep, step } from './types';

/**
 * Faults only a production-style Temporal can show (`--temporal prod`): one of its services, or its database, goes
 * away while operations run. Calls during the outage may answer ABORTED, UNAVAILABLE or DEADLINE_EXCEEDED and are
 * retried; anything else (a false OK shows in the audit, RESOURCE_EXHAUSTED among the unexpected answers) fails the
 * run. Afterwards every driver process must still serve and every operation finish.
 */
function prodOf(context: FaultContext, kind: string): ProdTemporal {
  const prod = context.temporal.prod;
  if (!prod) throw new Error(`${kind} needs the production-style Temporal: run the soak with --temporal prod`);
  return prod;
}

/** Creates (each preferring a node) and deletions issued while the outage lasts, spread over it. */
async function issueDuring(context: FaultContext, record: FaultRecord, downMs: number): Promise<number[]> {
  const ids: number[] = [];
  const count = 4;
  for (let index = 0; index < count; index++) {
    await sleep(downMs / (count + 1));
    const op =
      (index % 2 === 1 ? context.workload.deleteOne(record.kind) : undefined) ??
      context.workload.create(record.kind, { prefer: context.prng.pick(context.cluster.nodes).name });
    ids.push(op.id);
  }
  record.issuedOps.push(...ids);
  return ids;
}

/** Services that died on their own during a database outage are started again, as Kubernetes would, and reported. */
function restartDead(prod: ProdTemporal, exitsBefore: number): string[] {
  const died = prod.unexpectedExits().slice(exitsBefore);
  for (const service of Object.values(prod.services)) if (!service.alive()) service.start();
  return died;
}

function serviceRestart(kind: 'history-restart' | 'matching-restart', service: ServiceName): Fault {
  return {
    kind,
    plannedOps: (options) => options.nodes + 4,
    async run(context, record) {
      const prod = prodOf(context, kind);
      const signal = context.prng.chance(0.5) ? 'SIGKILL' : 'SIGTERM';
      const downMs = context.prng.int(5000, 15_000);
      const before = snapshotDriver(context);
      step(
        context,
        record,
        `${signal} temporal-server ${service} (pid ${prod.services[service].pid}); down ${downMs} ms`,
      );
      await prod.stopServices(signal, [service]);
      const during = await issueDuring(context, record, downMs);
      step(context, record, `start ${service} again`);
      prod.startServices([service]);
      await prod.waitReady(120_000);
      record.details = {
        service,
        signal,
        downMs,
        issuedDuringOutage: during,
        ...(await probeAfterOutage(context, record, before)),
      };
    },
  };
}

export const historyRestart = serviceRestart('history-restart', 'history');
export const matchingRestart = serviceRestart('matching-restart', 'matching');

/** PostgreSQL stopped (fast shutdown: every connection cut) for 15-30 s, then started again. */
export const postgresOutage: Fault = {
  kind: 'postgres-outage',
  plannedOps: (options) => options.nodes + 4,
  async run(context, record) {
    const prod = prodOf(context, 'postgres-outage');
    const downMs = context.prng.int(15_000, 30_000);
    const before = snapshotDriver(context);
    const exitsBefore = prod.unexpectedExits().length;
    step(context, record, `stop PostgreSQL for ${downMs} ms`);
    await prod.postgres.stop();
    const during = await issueDuring(context, record, downMs);
    step(context, record, 'start PostgreSQL again');
    await prod.postgres.start();
    const temporalRestarted = restartDead(prod, exitsBefore);
    if (temporalRestarted.length > 0)
      step(context, record, `restarted Temporal services: ${temporalRestarted.join('; ')}`);
    await prod.waitReady(180_000);
    record.details = {
      downMs,
      issuedDuringOutage: during,
      temporalRestarted,
      ...(await probeAfterOutage(context, record, before)),
    };
  },
};
