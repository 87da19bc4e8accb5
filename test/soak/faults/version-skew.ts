import { supportsGroups } from '../baseline';
import type { DriverProcess } from '../cluster';
import type { Fault } from './types';
import { awaitOps, sleep, step } from './types';

/** A create's first try on a node waits this long for the node before moving on (workflows/create-volume.ts). */
const FIRST_TRY_SCHEDULE_TO_START_MS = 20_000;

/**
 * An upgrade from the baseline build with work in flight. The run starts entirely on the old build; then:
 *   a. every node but the fullest goes down (say, a zone during the upgrade): deletions of their volumes and
 *      creates, placed by the old build's placement, are started by the old controllers and wait for them;
 *   b. one controller is rolled forward: old and new controllers serve the same workflows side by side;
 *   c. the other controller is stopped and started on the new build while the down nodes return on the new
 *      build, within the creates' schedule-to-start timeout: workflows the old build started and placed get
 *      their node's answer under the new code, which replays the old build's history;
 *   d. old and new agents side by side, then the last old node is rolled forward.
 * Every operation started under the old build must finish, and every volume ID must name its real node.
 */
export const versionSkew: Fault = {
  kind: 'version-skew',
  plannedOps: (options) => 16 + options.nodes,
  async run(context, record) {
    const { cluster, workload, prng, builds } = context;
    if (!builds.baseline) throw new Error('version-skew needs a baseline build');
    const [first, second] = cluster.controllers;
    if (!first || !second) throw new Error('two controllers expected');
    // The node placement likes least stays up: the old build's creates then wait for a node that is down.
    const available = await context.temporal.availableBytes().catch(() => new Map<string, number>());
    const free = (node: DriverProcess) => available.get(node.name) ?? -workload.model.bytesOn(node.name);
    const fullest = [...cluster.nodes].sort((a, b) => free(a) - free(b) || b.name.localeCompare(a.name));
    const lateNode = fullest[0] as DriverProcess;
    const downNodes = fullest.slice(1);
    const names = downNodes.map((node) => node.name).join(', ');
    const underOld: number[] = [];

    step(context, record, `a. all on ${builds.baseline.rev}: stop ${names}; start work that waits for them`);
    await Promise.all(downNodes.map((node) => node.stop()));
    for (const node of downNodes) {
      const op = workload.deleteOne(record.kind, { node: node.name });
      if (op) underOld.push(op.id);
    }
    underOld.push(workload.create(record.kind, { prefer: prng.pick(downNodes).name }).id);
    const createsAt = Date.now();
    for (let index = 0; index < 6; index++) underOld.push(workload.create(record.kind).id);
    // A fact of a mixed rollout, not a bug: a baseline without the GroupController answers its calls
    // UNIMPLEMENTED (CSI's answer for a service not served), and group calls wait for a new controller meanwhile.
    let groupService: { capabilities: string; create: string } | undefined;
    if (!supportsGroups(builds.baseline)) {
      groupService = await workload.askGroupService(first.name);
      step(
        context,
        record,
        `a. ${first.name} (${builds.baseline.rev}) answers GroupControllerGetCapabilities ${groupService.capabilities}` +
          `, CreateVolumeGroupSnapshot ${groupService.create}: no GroupController; group calls wait for a new controller`,
      );
      if (groupService.capabilities !== 'UNIMPLEMENTED' || groupService.create !== 'UNIMPLEMENTED')
        throw new Error(
          `the baseline's controller answered the GroupController (${JSON.stringify(groupService)}), ` +
            'though its controller --help names none: supportsGroups (test/soak/baseline.ts) is wrong for it',
        );
    }
    await sleep(1000);

    step(context, record, `b. roll ${first.name} forward: old and new controllers side by side`);
    await first.start(builds.current);
    const mixed: number[] = [];
    for (let index = 0; index < 6; index++) {
      const op = (prng.chance(0.4) ? workload.deleteOne(record.kind) : undefined) ?? workload.create(record.kind);
      mixed.push(op.id);
    }
    await sleep(prng.int(500, 1500));

    step(context, record, `c. stop ${second.name}; start it and ${names} on the new build`);
    await second.stop();
    await Promise.all([second, ...downNodes].map((process) => process.start(builds.current)));
    const returnedAfterMs = Date.now() - createsAt;
    const inTime = returnedAfterMs < FIRST_TRY_SCHEDULE_TO_START_MS;
    step(
      context,
      record,
      `c. ${names} back ${Math.round(returnedAfterMs / 1000)} s after the creates started` +
        (inTime ? '' : ' (too late: their first tries had timed out; the replay window was missed)'),
    );

    step(context, record, `d. ${lateNode.name} old, the other nodes new`);
    mixed.push(workload.create(record.kind, { prefer: lateNode.name }).id);
    const onLate = workload.deleteOne(record.kind, { node: lateNode.name });
    if (onLate) mixed.push(onLate.id);
    // A group of the old node's volumes, asked through a new controller: its node work waits for a new agent.
    const groupOnLate = workload.groupOne(record.kind, { node: lateNode.name });
    if (groupOnLate) mixed.push(groupOnLate.id);
    step(
      context,
      record,
      groupOnLate
        ? `d. group snapshot ${groupOnLate.name} of ${lateNode.name}'s volumes asked (op ${groupOnLate.id})`
        : `d. no group snapshot asked: ${lateNode.name} has fewer than 2 idle volumes`,
    );
    await sleep(prng.int(1000, 3000));
    step(context, record, `d. roll ${lateNode.name} forward`);
    await lateNode.start(builds.current);
    record.issuedOps.push(...underOld, ...mixed);

    const stillRunning = await awaitOps(context, [...underOld, ...mixed], 120_000);
    const outcomes = workload.model.ops
      .filter((op) => underOld.includes(op.id))
      .map((op) => ({
        op: op.id,
        kind: op.kind,
        name: op.name,
        outcome: op.outcome ?? 'running',
        volumeId: op.volumeId,
      }));
    const done = outcomes.filter((o) => o.outcome === 'ok').length;
    step(context, record, `operations started under the old build: ${done}/${outcomes.length} done`);
    record.details = {
      baseline: { rev: builds.baseline.rev, sha: builds.baseline.sha },
      downNodes: downNodes.map((node) => node.name),
      lateNode: lateNode.name,
      downNodesReturnedAfterMs: returnedAfterMs,
      returnedWithinFirstTryTimeout: inTime,
      startedUnderOldBuild: outcomes,
      mixedOps: mixed,
      stillRunningAfter120s: stillRunning,
      ...(groupService ? { oldControllerGroupService: groupService } : {}),
    };
  },
};
