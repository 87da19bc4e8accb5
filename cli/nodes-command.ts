import { Command } from 'commander';
import { formatBytes } from '../common/quantity';
import { forgetNode } from '../operations/forget-node';
import { readNodeOverview } from '../operations/node-overview';
import type { NodeOverview } from '../operations/node-overview';
import type { EvacuationResult, EvacuationStep } from '../operations/move-operations';
import { addOperatorOptions, ageOf, printJson, secondsSince, withTemporalClient } from './operator-options';
import type { OperatorFlags } from './operator-options';
import { printTable } from './table';

/** `nodes` (the registry, with pending work per node) and `nodes forget`; both read Temporal directly. */
export function nodesCommand(): Command {
  const nodes = new Command('nodes').description("the node records and operators' decisions about nodes");
  nodes.addCommand(listCommand(), { isDefault: true });
  nodes.addCommand(forgetCommand());
  nodes.addCommand(evacuateCommand());
  return nodes;
}

/**
 * `nodes evacuate NODE`: every claim's volume on the node moved, each to a node with room that its StorageClass
 * admits, as one move per volume (`volumes move`'s workflow: a second evacuate attaches to the moves running). The
 * node must be cordoned; its Pods must be gone (a volume in use is refused by its move, saying what to stop).
 */
function evacuateCommand(): Command {
  const command = new Command('evacuate')
    .description(
      "move every claim's volume off a cordoned node, each to a node with room that its StorageClass admits " +
        '(one durable move per volume; docs/operations.md, "Evacuate a node"); reads Kubernetes as kubectl does',
    )
    .argument('<node-id>')
    .option('--to <node-ids>', 'only these nodes as targets, comma-separated')
    .option('--parallel <n>', 'moves at a time', '4')
    .option('--dry-run', 'print the plan, move nothing');
  return addOperatorOptions(command).action(
    async (nodeId: string, flags: OperatorFlags & { to?: string; parallel: string; dryRun?: boolean }) => {
      const parallel = Number(flags.parallel);
      if (!Number.isInteger(parallel) || parallel < 1)
        throw new Error(`--parallel ${flags.parallel}: a whole number >= 1`);
      const { DriverError } = await import('../common/failures');
      const { evacuationKube } = await import('../kubernetes/controller-integration');
      const { evacuationClaims } = await import('../kubernetes/claim-switch');
      const { evacuationSnapshots } = await import('../kubernetes/snapshot-contents');
      const moves = await import('../operations/move-operations');
      const { listNodeViews } = await import('../node-records/reads');
      try {
        const kube = evacuationKube();
        const { claims, unschedulable } = await evacuationClaims(kube, flags.driverName, nodeId);
        const snapshots = await evacuationSnapshots(kube.custom, flags.driverName, nodeId);
        const outcome = await withTemporalClient(flags, async (client) => {
          const views = await listNodeViews(client, flags.driverName);
          const only = flags.to?.split(',').filter(Boolean);
          const targets = moves.evacuationTargets(views, nodeId, { unschedulable, ...(only ? { only } : {}) });
          const plan = moves.planEvacuation(claims, targets, snapshots);
          // Copies no VolumeSnapshot names (the orphan report's to judge) stay: said below.
          const unnamed = (views.find((view) => view.nodeId === nodeId)?.snapshotCount ?? 0) - snapshots.length;
          if (flags.dryRun) return { plan, results: [], unnamedSnapshots: unnamed };
          const results = await moves.runEvacuation(client, flags.driverName, plan, parallel, (line) =>
            process.stderr.write(`${line}\n`),
          );
          return { plan, results, unnamedSnapshots: unnamed };
        });
        if (flags.output === 'json') printJson(outcome);
        else printEvacuation(nodeId, outcome, flags.dryRun === true);
        if (outcome.plan.some((step) => 'refused' in step) || outcome.results.some((result) => result.error))
          process.exitCode = 1;
      } catch (error) {
        if (error instanceof DriverError) throw new Error(`${error.type}: ${error.message}`);
        throw error;
      }
    },
  );
}

function printEvacuation(
  nodeId: string,
  outcome: {
    plan: EvacuationStep[];
    results: EvacuationResult[];
    unnamedSnapshots: number;
  },
  dryRun: boolean,
): void {
  if (outcome.plan.length === 0)
    process.stdout.write(`node ${nodeId} holds no claim's volume and no VolumeSnapshot's snapshot\n`);
  const results = new Map(outcome.results.map((result) => [result.volumeId, result]));
  printTable(
    ['VOLUME OR SNAPSHOT', 'CLAIM OR VOLUMESNAPSHOT', 'SIZE', 'TO', dryRun ? 'PLAN' : 'OUTCOME'],
    outcome.plan.map((step) => {
      const [id, of, bytes] =
        'snapshotId' in step
          ? [step.snapshotId, `snapshot ${step.volumeSnapshot}`, step.sizeBytes]
          : [step.volumeId, step.claim ?? '', step.capacityBytes];
      const result = results.get(id);
      const said =
        'refused' in step
          ? `not moved: ${step.refused}`
          : dryRun
            ? 'would move'
            : result?.error
              ? `failed: ${result.error}`
              : `moved: ${result?.newVolumeId ?? '?'}`;
      return [id, of, formatBytes(bytes), 'targetNodeId' in step ? step.targetNodeId : '', said];
    }),
  );
  if (outcome.unnamedSnapshots > 0)
    process.stdout.write(
      `\n${outcome.unnamedSnapshots} snapshot copies on ${nodeId} are named by no VolumeSnapshot and stay (see ` +
        '`durable-csi volumes orphans`; delete them or move them by ID with `durable-csi snapshots move` before the ' +
        'node goes)\n',
    );
}

function listCommand(): Command {
  const command = new Command('list').description(
    'every registered node with liveness, capacity and pending operations, then the forgotten nodes (the default)',
  );
  return addOperatorOptions(command).action(async (flags: OperatorFlags) => {
    const overview = await withTemporalClient(flags, (client) => readNodeOverview(client, flags.driverName));
    const now = Date.now();
    if (flags.output === 'json') printJson(overviewJson(overview, now));
    else printOverview(overview, now);
  });
}

function overviewJson(overview: NodeOverview, now: number) {
  return {
    nodes: overview.nodes.map((node) => ({
      nodeId: node.nodeId,
      live: node.live,
      lastHeartbeat: new Date(node.lastHeartbeat),
      lastHeartbeatSeconds: secondsSince(node.lastHeartbeat, now),
      firstSeen: new Date(node.firstSeen),
      capacityBytes: node.capacityBytes,
      availableBytes: node.availableBytes,
      figuresAsOf: new Date(node.asOf),
      figuresAgeSeconds: secondsSince(node.asOf, now),
      volumeCount: node.volumeCount,
      pending: node.pending,
      writtenOff: node.writtenOff,
      backend: node.backend,
      poolId: node.poolId,
      agentVersion: node.agentVersion,
    })),
    forgotten: overview.forgotten.map((node) => ({
      nodeId: node.nodeId,
      reason: node.reason,
      at: node.at,
      lastHeartbeat: node.lastHeartbeat === undefined ? null : new Date(node.lastHeartbeat),
    })),
    unknown: overview.unknown,
  };
}

function printOverview(overview: NodeOverview, now: number): void {
  if (overview.nodes.length === 0) process.stdout.write('no registered nodes\n');
  else {
    // CAPACITY, AVAILABLE and VOLUMES are the agent's own figures AS OF its latest heartbeat (live nodes) or
    // its last report (offline nodes).
    printTable(
      ['NODE', 'LIVE', 'LAST HEARTBEAT', 'CAPACITY', 'AVAILABLE', 'VOLUMES', 'AS OF', 'PENDING', 'BACKEND'],
      overview.nodes.map((node) => [
        node.nodeId,
        node.live ? 'yes' : 'no',
        `${ageOf(node.lastHeartbeat, now)} ago`,
        formatBytes(node.capacityBytes),
        formatBytes(node.availableBytes),
        String(node.volumeCount),
        `${ageOf(node.asOf, now)} ago`,
        String(node.pending),
        node.backend,
      ]),
    );
  }
  const stuck = overview.nodes.filter((node) => node.writtenOff > 0);
  for (const node of stuck)
    process.stdout.write(
      `${node.nodeId}: ${node.writtenOff} volume(s) or snapshot(s) written off while it was forgotten are still to ` +
        `delete on its pool (its record retries them; their failures are on the record's activities)\n`,
    );
  if (overview.unknown.length > 0) {
    process.stdout.write('\n');
    printTable(
      ['UNKNOWN NODE', 'PENDING', 'TO END THE WAIT'],
      overview.unknown.map((node) => [
        node.nodeId,
        String(node.pending),
        `durable-csi nodes forget ${node.nodeId} --reason TEXT`,
      ]),
    );
  }
  if (overview.forgotten.length === 0) return;
  process.stdout.write('\n');
  printTable(
    ['FORGOTTEN', 'REASON', 'FORGOTTEN AT', 'LAST HEARTBEAT'],
    overview.forgotten.map((node) => [
      node.nodeId,
      node.reason,
      `${node.at} (${ageOf(Date.parse(node.at), now)} ago)`,
      node.lastHeartbeat === undefined ? 'never' : `${ageOf(node.lastHeartbeat, now)} ago`,
    ]),
  );
}

function forgetCommand(): Command {
  const command = new Command('forget')
    .description(
      'declare a node gone for good: the decision is recorded on its node record and every operation waiting ' +
        'for it ends (deletions with the outcome node-forgotten), also for a node that never registered. ' +
        'Refused for a live node. Its volumes are lost.',
    )
    .argument('<node-id>')
    .requiredOption('--reason <text>', 'why, kept in the node record and in every released operation');
  return addOperatorOptions(command).action(async (nodeId: string, flags: OperatorFlags & { reason: string }) => {
    const outcome = await withTemporalClient(flags, (client) =>
      forgetNode(client, flags.driverName, nodeId, flags.reason),
    );
    if (flags.output === 'json') {
      printJson({ ...outcome.notice, released: outcome.released });
      return;
    }
    const { notice, released } = outcome;
    const count = `released ${released.length} pending operation${released.length === 1 ? '' : 's'}`;
    process.stdout.write(`forgot node ${notice.nodeId} (${notice.reason}); ${count}\n`);
    for (const workflowId of released) process.stdout.write(`  ${workflowId}\n`);
  });
}
