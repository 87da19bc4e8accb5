import type { Fault } from './types';
import { awaitOps, sleep, step } from './types';

/**
 * An upgrade from the baseline build with work in flight. The run starts entirely on the old build; then:
 *   a. an old node goes down and work is aimed at it (deletions wait in its queue, creates time out on it),
 *      started by old controllers;
 *   b. one controller is rolled forward: old and new controllers serve the same workflows side by side;
 *   c. all but one of the live nodes are rolled forward: old and new agents side by side;
 *   d. the other controller is rolled forward: every workflow the old build started continues under the new;
 *   e. the down node returns on the new build and runs the activities old workflows scheduled for it;
 *   f. the last old node is rolled forward.
 * Every operation started under the old build must then finish.
 */
export const versionSkew: Fault = {
  kind: 'version-skew',
  plannedOps: () => 21,
  async run(context, record) {
    const { cluster, workload, prng, builds } = context;
    if (!builds.baseline) throw new Error('version-skew needs a baseline build');
    const [first, second] = cluster.controllers;
    if (!first || !second) throw new Error('two controllers expected');
    const nodes = prng.shuffle(cluster.nodes);
    const [downNode, lateNode, ...others] = nodes;
    if (!downNode || !lateNode) throw new Error('two nodes at least');
    const underOld: number[] = [];

    await workload.ensureOn(downNode.name, 3, record.kind, 45_000);
    step(context, record, `a. all on ${builds.baseline.rev}: stop ${downNode.name} and aim work at it`);
    await downNode.stop();
    for (let index = 0; index < 3; index++) {
      const op = workload.deleteOne(record.kind, { node: downNode.name });
      if (op) underOld.push(op.id);
    }
    underOld.push(workload.create(record.kind, { prefer: downNode.name }).id);
    // Unpreferred creates: placement (which may differ between the builds) decides; some land on the down node
    // and wait for its schedule-to-start timeout while the controllers change version under them.
    for (let index = 0; index < 6; index++) underOld.push(workload.create(record.kind).id);
    await sleep(2500);

    step(context, record, `b. roll ${first.name} forward: old and new controllers side by side`);
    await first.start(builds.current);
    const mixedSince = Date.now();
    const mixed: number[] = [];
    for (let index = 0; index < 6; index++) {
      const op = (prng.chance(0.5) ? workload.deleteOne(record.kind) : undefined) ?? workload.create(record.kind);
      mixed.push(op.id);
    }
    await sleep(prng.int(3000, 6000));

    for (const node of others) {
      step(context, record, `c. roll ${node.name} forward`);
      await node.start(builds.current);
      await sleep(prng.int(500, 1500));
    }
    step(
      context,
      record,
      `c. mixed: ${lateNode.name} old, ${others.map((n) => n.name).join(', ')} new, ${downNode.name} down`,
    );
    for (let index = 0; index < 3; index++) mixed.push(workload.create(record.kind, { prefer: lateNode.name }).id);
    // Old and new controllers side by side for longer than a first try's schedule-to-start timeout (20 s), so
    // workflows started by one build see that timeout, or their node's answer, handled by the other.
    await sleep(Math.max(prng.int(2000, 4000), mixedSince + 25_000 - Date.now()));

    step(context, record, `d. roll ${second.name} forward: the old build's workflows continue under the new one`);
    await second.start(builds.current);
    step(context, record, `e. ${downNode.name} returns on the new build`);
    await downNode.start(builds.current);
    step(context, record, `f. roll ${lateNode.name} forward`);
    await lateNode.start(builds.current);
    record.issuedOps.push(...underOld, ...mixed);

    const stillRunning = await awaitOps(context, [...underOld, ...mixed], 120_000);
    const outcomes = workload.model.ops
      .filter((op) => underOld.includes(op.id))
      .map((op) => ({ op: op.id, kind: op.kind, name: op.name, outcome: op.outcome ?? 'running' }));
    step(
      context,
      record,
      `operations started under the old build: ${outcomes.filter((o) => o.outcome === 'ok').length}/${outcomes.length} done`,
    );
    record.details = {
      baseline: { rev: builds.baseline.rev, sha: builds.baseline.sha },
      downNode: downNode.name,
      lateNode: lateNode.name,
      startedUnderOldBuild: outcomes,
      mixedOps: mixed,
      stillRunningAfter120s: stillRunning,
    };
  },
};
