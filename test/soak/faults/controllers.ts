import type { Fault, FaultContext, FaultRecord } from './types';
import { sleep, step } from './types';

function issueVia(context: FaultContext, record: FaultRecord, via: number, count: number): number[] {
  const ids: number[] = [];
  for (let index = 0; index < count; index++) {
    const op =
      (context.prng.chance(0.4) ? context.workload.deleteOne(record.kind, { via }) : undefined) ??
      context.workload.create(record.kind, { via });
    ids.push(op.id);
  }
  record.issuedOps.push(...ids);
  return ids;
}

/** A Deployment rollout: each controller replica in turn is stopped (SIGTERM) just after calls reach it. */
export const controllerRollout: Fault = {
  kind: 'controller-rollout',
  plannedOps: () => 4,
  async run(context, record) {
    for (const [index, controller] of context.cluster.controllers.entries()) {
      issueVia(context, record, index, 2);
      await sleep(context.prng.int(50, 400));
      const inFlight = context.workload.inFlightOn(controller.name).map((op) => op.id);
      step(context, record, `stop ${controller.name} (${inFlight.length} calls in flight on it)`);
      await controller.stop();
      await sleep(context.prng.int(500, 2500));
      step(context, record, `start ${controller.name}`);
      await controller.start(context.builds.current);
      record.details[controller.name] = { inFlightAtStop: inFlight };
    }
  },
};

/** SIGKILL of a controller while calls it received are in flight; it is started again a moment later. */
export const controllerKill: Fault = {
  kind: 'controller-kill',
  plannedOps: () => 10,
  async run(context, record) {
    const kills: { controller: string; afterMs: number; inFlightAtKill: number[] }[] = [];
    for (let tries = 0; tries < 3; tries++) {
      const via = context.prng.int(0, context.cluster.controllers.length - 1);
      const controller = context.cluster.controllers[via];
      if (!controller) throw new Error(`no controller ${via}`);
      issueVia(context, record, via, context.prng.int(3, 5));
      const afterMs = context.prng.int(30, 600);
      await sleep(afterMs);
      const inFlight = context.workload.inFlightOn(controller.name).map((op) => op.id);
      step(
        context,
        record,
        `SIGKILL ${controller.name} ${afterMs} ms after sending it calls (${inFlight.length} in flight)`,
      );
      await controller.kill('SIGKILL');
      kills.push({ controller: controller.name, afterMs, inFlightAtKill: inFlight });
      await sleep(context.prng.int(1000, 3000));
      step(context, record, `start ${controller.name}`);
      await controller.start(context.builds.current);
      if (inFlight.length > 0) break;
    }
    record.details.kills = kills;
  },
};
