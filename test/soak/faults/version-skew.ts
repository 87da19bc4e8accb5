import type { DriverProcess } from '../cluster';
import type { Fault } from './types';
import { awaitOps, sleep, step } from './types';

/**
 * An upgrade from the baseline build with work in flight. The run starts entirely on the old build; then:
 *   a. the old node with the most free space (where the old placement sends unpreferred creates) goes down;
 *      deletions of its volumes and creates are started by the old controllers and wait for it;
 *   b. one controller is rolled forward: old and new controllers serve the same workflows side by side;
 *   c. the other controller is stopped, and started on the new build while the down node returns on the new
 *      build, within the creates' 20 s schedule-to-start timeout: the workflows the old build started (and
 *      placed) get their node's answer under the new code;
 *   d. the other old nodes are rolled forward one at a time, old and new agents side by side meanwhile.
 * Every operation started under the old build must then finish, and every volume ID must name its real node.
 */
export const versionSkew: Fault = {
  kind: 'version-skew',
  plannedOps: (options) => 20 + options.nodes,
  async run(context, record) {
    const { cluster, workload, prng, builds } = context;
    if (!builds.baseline) throw new Error('version-skew needs a baseline build');
    const [first, second] = cluster.controllers;
    if (!first || !second) throw new Error('two controllers expected');
    const byFreeSpace = [...cluster.nodes].sort(
      (a, b) => workload.model.bytesOn(a.name) - workload.model.bytesOn(b.name) || a.name.localeCompare(b.name),
    );
    const downNode = byFreeSpace[0] as DriverProcess;
    const underOld: number[] = [];

    step(context, record, `a. all on ${builds.baseline.rev}: stop ${downNode.name} and start work that waits for it`);
    await downNode.stop();
    for (let index = 0; index < 3; index++) {
      const op = workload.deleteOne(record.kind, { node: downNode.name });
      if (op) underOld.push(op.id);
    }
    underOld.push(workload.create(record.kind, { prefer: downNode.name }).id);
    const createsAt = Date.now();
    for (let index = 0; index < 6; index++) underOld.push(workload.create(record.kind).id);
    await sleep(1500);

    step(context, record, `b. roll ${first.name} forward: old and new controllers side by side`);
    await first.start(builds.current);
    const mixed: number[] = [];
    for (let index = 0; index < 6; index++) {
      const op = (prng.chance(0.4) ? workload.deleteOne(record.kind) : undefined) ?? workload.create(record.kind);
      mixed.push(op.id);
    }
    await sleep(prng.int(1000, 3000));

    step(context, record, `c. stop ${second.name}; start it and ${downNode.name} on the new build`);
    await second.stop();
    await Promise.all([second.start(builds.current), downNode.start(builds.current)]);
    const returnedAfterMs = Date.now() - createsAt;
    step(context, record, `c. ${downNode.name} back ${Math.round(returnedAfterMs / 1000)} s after the creates started`);

    for (const node of cluster.nodes.filter((node) => node !== downNode)) {
      mixed.push(workload.create(record.kind, { prefer: node.name }).id);
      const op = workload.deleteOne(record.kind, { node: node.name });
      if (op) mixed.push(op.id);
      await sleep(prng.int(1000, 3000));
      step(context, record, `d. roll ${node.name} forward`);
      await node.start(builds.current);
    }
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
      downNode: downNode.name,
      downNodeReturnedAfterMs: returnedAfterMs,
      startedUnderOldBuild: outcomes,
      mixedOps: mixed,
      stillRunningAfter120s: stillRunning,
    };
  },
};
