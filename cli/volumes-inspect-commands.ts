import { Command } from 'commander';
import { parseDuration, formatDuration } from '../common/duration';
import { formatBytes } from '../common/quantity';
import type { ClaimDescription, OperationHistory, VolumeDescription } from '../operations/describe-volume';
import type { OperationSummary } from '../operations/pending-operations';
import type { MoveStart } from '../operations/move-operations';
import type { MoveVolumeResult } from '../workflows/move-volume';
import type { Client } from '@temporalio/client';
import { addOperatorOptions, ageOf, printJson, secondsSince, withTemporalClient } from './operator-options';
import type { OperatorFlags } from './operator-options';
import { printTable } from './table';

/**
 * `volumes stuck` and `volumes describe`: read from Temporal's visibility API and histories, not the CSI socket.
 * Their modules load when they run, so that `volumes list` stays quick (cli/main.ts).
 */
export function addVolumeInspectCommands(volumes: Command): void {
  volumes.addCommand(stuckCommand());
  volumes.addCommand(describeCommand());
  volumes.addCommand(moveCommand());
}

/** How often `volumes move` looks at its move while it runs. */
const MOVE_POLL_MS = 500;

function moveCommand(): Command {
  const command = new Command('move')
    .description(
      'move a volume to another node (a durable workflow whose ID is derived from the volume ID: a second request ' +
        'attaches): its data copied, then, with a controller run with --kubernetes, its claim bound under the same ' +
        'name to a new PV naming the copy and the old volume deleted; without, the copy is made and the source ' +
        'stays the one in use (docs/volume-moves.md); reads Temporal (and, for --pvc, Kubernetes as kubectl does)',
    )
    .argument('[volume-id]')
    .option('--to <node-id>', 'the node to move the volume to (live, serving copies, a pool of the same backend)')
    .option('--pvc <namespace/name>', 'the claim whose volume to move, instead of a volume ID')
    .option(
      '--cancel',
      "cancel the volume's running move: it rolls back, unless the claim is already switched; a terminated move is " +
        'rolled back',
    );
  return addOperatorOptions(command).action(
    async (given: string | undefined, flags: OperatorFlags & { to?: string; pvc?: string; cancel?: boolean }) => {
      if ((given === undefined) === (flags.pvc === undefined))
        throw new Error('volumes move takes a volume ID or --pvc NAMESPACE/NAME, one of them');
      if ((flags.to === undefined) === (flags.cancel === undefined))
        throw new Error('volumes move takes --to NODE (a move) or --cancel (of the running one), one of them');
      const { DriverError } = await import('../common/failures');
      const { startMove, cancelMove } = await import('../operations/move-operations');
      try {
        const volumeId = given ?? (await volumeOfClaim(flags.driverName, flags.pvc!));
        if (flags.cancel) {
          const said = await withTemporalClient(flags, (client) => cancelMove(client, flags.driverName, volumeId));
          process.stdout.write(`${said}\n`);
          return;
        }
        const to = flags.to!;
        const result = await withTemporalClient(flags, async (client) =>
          followMove<MoveVolumeResult>(
            client,
            await startMove(client, flags.driverName, { volumeId, targetNodeId: to }),
          ),
        );
        if (flags.output === 'json') return printJson(result);
        const copy =
          `(${formatBytes(result.fetchedBytes)} fetched, resumed at chunk ${result.resumedFromChunk} of ` +
          `${result.chunkCount})`;
        process.stdout.write(
          `${result.newVolumeId}\t${result.targetNodeId}\t` +
            (result.outcome === 'moved'
              ? `moved from ${result.volumeId} ${copy}; claim ${result.claim} is bound to ${result.persistentVolume}, ` +
                'the old volume deleted\n'
              : `copied from ${result.volumeId} ${copy}; the source volume is untouched (no Kubernetes to switch)\n`),
        );
      } catch (error) {
        if (error instanceof DriverError) throw new Error(`${error.type}: ${error.message}`);
        throw error;
      }
    },
  );
}

/**
 * Says the move started (or attached to), prints each change of its phase, node, copy progress and waiting step to
 * stderr while it runs, and answers its result (or throws the DriverError it failed with): `volumes move`,
 * `snapshots move`.
 */
export async function followMove<Result>(client: Client, start: MoveStart): Promise<Result> {
  const { moveProgress, moveResult } = await import('../operations/move-operations');
  process.stderr.write(
    `${start.attached ? 'attached to' : 'started'} ${start.workflowId}${start.note ? `: ${start.note}` : ''}\n`,
  );
  const handle = client.workflow.getHandle(start.workflowId);
  let ended = false;
  const watching = (async () => {
    let said = '';
    while (!ended) {
      const view = await moveProgress(handle).catch(() => undefined);
      if (view && view.status === 'RUNNING') {
        const where = view.nodeId ? ` on ${view.nodeId}` : '';
        const line = `${view.phase ?? '?'}${where}${copiedText(view.copied)}${view.pending
          .filter((text) => text.includes('failure') || text.includes('scheduled'))
          .map((text) => `; ${text}`)
          .join('')}`;
        if (line !== said) process.stderr.write(`${line}\n`);
        said = line;
      }
      await new Promise((resolve) => setTimeout(resolve, MOVE_POLL_MS));
    }
  })();
  try {
    return await moveResult<Result>(handle);
  } finally {
    ended = true;
    await watching;
  }
}

/** The volume ID of the PV a claim is bound to, read from Kubernetes as kubectl would (KUBECONFIG, ~/.kube/config). */
async function volumeOfClaim(driverName: string, pvc: string): Promise<string> {
  const { parseClaim } = await import('../operations/describe-volume');
  const claim = parseClaim(pvc); // bad input is refused before Kubernetes is looked for
  const { claimKube } = await import('../kubernetes/controller-integration');
  const { claimVolumeId } = await import('../kubernetes/claim-switch');
  return claimVolumeId(claimKube(), driverName, claim);
}

function stuckCommand(): Command {
  const command = new Command('stuck')
    .description('pending volume operations (running workflows), oldest first; reads Temporal directly')
    .option('--node <node-id>', 'only operations on this node')
    .option('--older-than <duration>', 'only operations started at least this long ago, e.g. 10m');
  return addOperatorOptions(command).action(async (flags: OperatorFlags & { node?: string; olderThan?: string }) => {
    const now = Date.now();
    const startedBefore = flags.olderThan ? new Date(now - parseDuration(flags.olderThan)) : undefined;
    const { listPendingOperations } = await import('../operations/pending-operations');
    const pending = await withTemporalClient(flags, (client) =>
      listPendingOperations(client, flags.driverName, { nodeId: flags.node, startedBefore }),
    );
    if (flags.output === 'json') {
      printJson({ operations: pending.map((operation) => pendingJson(operation, now)) });
    } else if (pending.length === 0) {
      process.stdout.write('no pending operations\n');
    } else {
      printTable(
        ['OPERATION', 'VOLUME', 'NODE', 'PHASE', 'AGE', 'WAITING', 'WORKFLOW ID'],
        pending.map((operation) => [
          operation.operation,
          operation.volumeId ?? operation.volumeName ?? '',
          operation.nodeId ?? '',
          operation.phase ?? '',
          ageOf(operation.startTime, now),
          operation.waitingSince ? ageOf(operation.waitingSince, now) : '',
          operation.workflowId,
        ]),
      );
    }
  });
}

function pendingJson(operation: OperationSummary, now: number) {
  return {
    workflowId: operation.workflowId,
    runId: operation.runId,
    operation: operation.operation,
    volumeId: operation.volumeId,
    volumeName: operation.volumeName,
    nodeId: operation.nodeId,
    phase: operation.phase,
    startTime: operation.startTime,
    ageSeconds: secondsSince(operation.startTime, now),
    waitingSince: operation.waitingSince,
    waitingSeconds: operation.waitingSince ? secondsSince(operation.waitingSince, now) : null,
  };
}

function describeCommand(): Command {
  const command = new Command('describe')
    .description(
      "a volume's operations (create, deletions, expansions, moves) and their timelines, by volume ID (or a " +
        "snapshot's deletions and moves, by snapshot ID) or by the claim (--pvc NAMESPACE/NAME: every volume made " +
        'for it); reads Temporal directly',
    )
    .argument('[volume-id]')
    .option('--pvc <namespace/name>', "the PersistentVolumeClaim's operations instead of one volume's");
  return addOperatorOptions(command).action(
    async (volumeId: string | undefined, flags: OperatorFlags & { pvc?: string }) => {
      const { describeClaim, describeVolume, parseClaim } = await import('../operations/describe-volume');
      if ((volumeId === undefined) === (flags.pvc === undefined))
        throw new Error('volumes describe takes a volume ID or --pvc NAMESPACE/NAME, one of them');
      if (flags.pvc !== undefined) {
        const claim = parseClaim(flags.pvc);
        const description = await withTemporalClient(flags, (client) => describeClaim(client, flags.driverName, claim));
        if (flags.output === 'json') printJson(description);
        else printClaim(description, Date.now());
        return;
      }
      const description = await withTemporalClient(flags, (client) =>
        describeVolume(client, flags.driverName, volumeId!),
      );
      if (flags.output === 'json') printJson(description);
      else printDescription(description, Date.now());
    },
  );
}

function printClaim(description: ClaimDescription, now: number): void {
  const { namespace, name } = description.pvc;
  process.stdout.write(`pvc     ${namespace}/${name}\n`);
  if (description.volumes.length === 0 && description.unplaced.length === 0) {
    process.stdout.write(
      '\nno operations found: none was made for this claim since the PVC search attributes were registered, or ' +
        'they are older than the namespace retention period\n',
    );
  }
  for (const volume of description.volumes) {
    process.stdout.write('\n');
    printDescription(volume, now);
  }
  for (const operation of description.unplaced) printOperation(operation, now);
}

function printDescription(description: VolumeDescription, now: number): void {
  const { node } = description;
  const heard = node.lastHeartbeat ? `, last heartbeat ${ageOf(node.lastHeartbeat, now)} ago` : '';
  const reason = node.reason ? ` (${node.reason})` : '';
  process.stdout.write(`volume  ${description.volumeId}\n`);
  process.stdout.write(`node    ${description.nodeId}: ${node.state}${reason}${heard}\n`);
  if (description.operations.length === 0) {
    process.stdout.write('\nno operations found (closed workflows are kept for the namespace retention period)\n');
  }
  for (const operation of description.operations) printOperation(operation, now);
}

function printOperation(operation: OperationHistory, now: number): void {
  const start = operation.startTime.getTime();
  const closed = operation.closeTime
    ? `closed ${operation.closeTime.toISOString()} (after ${formatDuration(operation.closeTime.getTime() - start)})`
    : `running for ${ageOf(start, now)}`;
  const phase = operation.phase ? `  phase ${operation.phase}${operation.nodeId ? ` on ${operation.nodeId}` : ''}` : '';
  process.stdout.write(`\n${operation.operation}  ${operation.workflowId}  ${operation.status}${phase}\n`);
  if (operation.summary) process.stdout.write(`  ${operation.summary}\n`);
  process.stdout.write(`  started ${operation.startTime.toISOString()}, ${closed}\n`);
  for (const activity of operation.pendingActivities) {
    const failure = activity.lastFailure ? `, last failure: ${activity.lastFailure}` : '';
    const copied = copiedText(activity.progress);
    process.stdout.write(
      `  pending: ${activity.activityType} ${activity.state}, attempt ${activity.attempt}${copied}${failure}\n`,
    );
  }
  printTable(
    ['  TIME', 'AFTER', 'EVENT', 'DETAIL'],
    operation.timeline.map((event) => [
      `  ${event.time.toISOString().slice(11, 23)}`,
      formatDuration(event.time.getTime() - start),
      event.event,
      event.detail,
    ]),
  );
}

/** A move's pull heartbeats its progress (activities/node-activities.ts, MoveProgress): ", 12Mi of 64Mi copied". */
export function copiedText(progress: unknown): string {
  const { chunks, chunkCount, fetchedBytes, sizeBytes, phase } = (progress ?? {}) as Record<string, unknown>;
  if (typeof chunks !== 'number' || typeof chunkCount !== 'number' || typeof sizeBytes !== 'number') return '';
  const fetched = typeof fetchedBytes === 'number' ? `, ${formatBytes(fetchedBytes)} fetched by this attempt` : '';
  return `, ${phase === 'verifying' ? 'verified' : 'copied'} ${chunks} of ${chunkCount} chunks (${formatBytes(sizeBytes)})${fetched}`;
}
