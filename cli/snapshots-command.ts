import { status } from '@grpc/grpc-js';
import { WorkflowFailedError } from '@temporalio/client';
import { Command } from 'commander';
import { DriverError, FailureType } from '../common/failures';
import { formatBytes } from '../common/quantity';
import { toGrpcStatus } from '../csi/errors';
import { SnapshotOperations, silentNode, snapshotLookup } from '../operations/snapshot-operations';
import type { ListedSnapshot } from '../workflows/listing';
import type { MoveSnapshotResult } from '../workflows/move-volume';
import { parseGroupSnapshotId } from '../common/names';
import { describeGroupSnapshotDeleteOutcome, describeSnapshotDeleteOutcome } from './delete-outcome-text';
import { describeUnanswered } from './list-all-volumes';
import { addOperatorOptions, printJson, withTemporalClient } from './operator-options';
import type { OperatorFlags } from './operator-options';
import { checkSnapshotId, checkSnapshotName, checkSourceVolumeId } from './snapshot-input';
import { printTable } from './table';

type SnapshotFlags = OperatorFlags & { timeout: string };

/**
 * `snapshots create|delete|list`: the controller's own snapshot operations (operations/snapshot-operations.ts),
 * started from here against Temporal, so a CLI create and a CSI CreateSnapshot of one name are one workflow. A
 * controller must be running: its worker runs the workflows.
 */
export function snapshotsCommand(): Command {
  const snapshots = new Command('snapshots').description(
    "create, delete and list snapshots through the controller's workflows (docs/snapshots.md); reads Temporal directly",
  );
  snapshots.addCommand(createCommand());
  snapshots.addCommand(deleteCommand());
  snapshots.addCommand(listCommand());
  snapshots.addCommand(moveCommand());
  return snapshots;
}

/**
 * `snapshots move SNAPSHOT_ID --to NODE`: the snapshot's copy moved as a volume's is (`volumes move`), then, with a
 * controller run with --kubernetes, its VolumeSnapshot made again under its name naming the copy, and the old
 * snapshot deleted (docs/volume-moves.md, "Snapshots").
 */
function moveCommand(): Command {
  const command = new Command('move')
    .description(
      'move a snapshot to another node (a durable workflow whose ID is derived from the snapshot ID: a second ' +
        'request attaches): its copy pulled by the target, then, with a controller run with --kubernetes, its ' +
        'VolumeSnapshot made again under its name naming the copy and the old snapshot deleted; without, the copy ' +
        'is made and the source stays (docs/volume-moves.md)',
    )
    .argument('<snapshot-id>')
    .option('--to <node-id>', 'the node to move the snapshot to (live, serving copies, a pool of the same backend)')
    .option(
      '--cancel',
      "cancel the snapshot's running move: it rolls back, unless its VolumeSnapshot is switched; a terminated move " +
        'is rolled back',
    );
  return addOperatorOptions(command).action(
    async (snapshotId: string, flags: OperatorFlags & { to?: string; cancel?: boolean }) => {
      if ((flags.to === undefined) === (flags.cancel === undefined))
        throw new Error('snapshots move takes --to NODE (a move) or --cancel (of the running one), one of them');
      const { startSnapshotMove, cancelMove } = await import('../operations/move-operations');
      const { followMove } = await import('./volumes-inspect-commands');
      try {
        if (flags.cancel) {
          const said = await withTemporalClient(flags, (client) => cancelMove(client, flags.driverName, snapshotId));
          process.stdout.write(`${said}\n`);
          return;
        }
        const request = { snapshotId, targetNodeId: flags.to! };
        const result = await withTemporalClient(flags, async (client) =>
          followMove<MoveSnapshotResult>(client, await startSnapshotMove(client, flags.driverName, request)),
        );
        if (flags.output === 'json') return printJson(result);
        const copy =
          `(${formatBytes(result.fetchedBytes)} fetched, resumed at chunk ${result.resumedFromChunk} of ` +
          `${result.chunkCount})`;
        process.stdout.write(
          `${result.newSnapshotId}\t${result.targetNodeId}\t` +
            (result.outcome === 'moved'
              ? `moved from ${result.snapshotId} ${copy}; VolumeSnapshot ${result.volumeSnapshot} is bound to ` +
                `${result.content}, the old snapshot deleted\n`
              : `copied from ${result.snapshotId} ${copy}; the source snapshot is untouched (no Kubernetes to switch)\n`),
        );
      } catch (error) {
        if (error instanceof DriverError) throw new Error(`${error.type}: ${error.message}`);
        throw error;
      }
    },
  );
}

function createCommand(): Command {
  const command = new Command('create')
    .description('CreateSnapshot of a volume on its node; waits while the copy is not done, as the CO retries')
    .requiredOption('--source <volume-id>', 'the volume to copy')
    .requiredOption('--name <name>', 'the snapshot name (the CSI name: one name, one snapshot)');
  return addSnapshotOptions(command).action(async (flags: SnapshotFlags & { source: string; name: string }) => {
    checkSourceVolumeId(flags.source);
    const name = checkSnapshotName(flags.name);
    const wait = waitMs(flags);
    const made = await withSnapshots(flags, async (operations) => {
      for (;;) {
        try {
          // Each attempt is a request of its own, as the CO's retries are; the operator waits for this one.
          return await operations.create(name, flags.source, wait, { receivedAt: new Date(), abandoned: () => false });
        } catch (error) {
          if (!(error instanceof DriverError) || error.type !== FailureType.Aborted) throw error;
          process.stderr.write(`${error.message}\n`);
        }
        await new Promise((resolve) => setTimeout(resolve, 1000));
      }
    });
    if (flags.output === 'json') return printJson(made);
    process.stdout.write(`${made.snapshotId}\t${formatBytes(made.sizeBytes)}\t${made.nodeId}\n`);
  });
}

function deleteCommand(): Command {
  const command = new Command('delete')
    .description(
      'DeleteSnapshot once, or DeleteVolumeGroupSnapshot of a group snapshot ID (g1_: every member the pool holds); ' +
        'a deletion waiting for its node is reported, and keeps going durably',
    )
    .argument('<snapshot-id>');
  return addSnapshotOptions(command).action(async (snapshotId: string, flags: SnapshotFlags) => {
    if (parseGroupSnapshotId(snapshotId)) return deleteGroup(snapshotId, flags);
    checkSnapshotId(snapshotId);
    const wait = waitMs(flags);
    const result = await withSnapshots(flags, (operations) => operations.delete(snapshotId, wait));
    if (result === 'never-issued') throw new Error(`"${snapshotId}" is not a snapshot ID this driver issues`);
    if (flags.output === 'json') return printJson({ snapshotId, ...result });
    process.stdout.write(`${describeSnapshotDeleteOutcome(snapshotId, result.outcome, result.reason)}\n`);
  });
}

/**
 * A group snapshot is deleted whole (a member's DeleteSnapshot is refused): its members are asked of its node's pool
 * first (GetVolumeGroupSnapshot's lookup), since the deletion must name exactly them. A group the pool no longer
 * holds (or whose node was forgotten) has nothing to delete; a silent node is UNAVAILABLE and nothing starts.
 */
async function deleteGroup(groupSnapshotId: string, flags: SnapshotFlags): Promise<void> {
  const wait = waitMs(flags);
  const result = await withSnapshots(flags, async (operations) => {
    let members: ListedSnapshot[];
    try {
      members = await operations.getGroup(groupSnapshotId, []);
    } catch (error) {
      if (error instanceof DriverError && error.type === FailureType.NotFound) return { gone: error.message };
      throw error;
    }
    const snapshotIds = members.map((member) => member.snapshotId);
    const deleted = await operations.deleteGroup(groupSnapshotId, snapshotIds, wait);
    if (deleted === 'never-issued')
      throw new Error(`"${groupSnapshotId}" is not a group snapshot ID this driver issues`);
    return { snapshotIds, ...deleted };
  });
  if ('gone' in result) {
    if (flags.output === 'json') return printJson({ groupSnapshotId, outcome: 'absent', reason: result.gone });
    process.stdout.write(`nothing to delete: ${result.gone}\n`);
    return;
  }
  if (flags.output === 'json') return printJson({ groupSnapshotId, ...result });
  process.stdout.write(`${describeGroupSnapshotDeleteOutcome(groupSnapshotId, result.outcome, result.reason)}\n`);
}

function listCommand(): Command {
  const command = new Command('list')
    .description('every snapshot the pools hold, from the pools; names the nodes that did not answer')
    .option('--source <volume-id>', "only this volume's snapshots (asks its node only)")
    .option('--json', 'the same as --output json');
  return addOperatorOptions(command).action(async (flags: OperatorFlags & { source?: string; json?: boolean }) => {
    const source = flags.source === undefined ? undefined : checkSourceVolumeId(flags.source);
    const listed = await withSnapshots(flags, async (operations) => {
      const lookup = source ? snapshotLookup({ sourceVolumeId: flags.source }) : undefined;
      const found = await operations.list(lookup === 'nothing' ? undefined : lookup);
      if (source && found.unreachableNodes.includes(source.nodeId)) throw silentNode(source.nodeId);
      return { snapshots: found.snapshots, unansweredNodes: found.unreachableNodes };
    });
    if (flags.json || flags.output === 'json') return printJson(listed);
    if (listed.snapshots.length === 0) process.stdout.write('no snapshots\n');
    else printTable(SNAPSHOT_COLUMNS, snapshotRows(listed.snapshots));
    const unanswered = describeUnanswered(listed.unansweredNodes, 'snapshots');
    if (unanswered) process.stderr.write(`${unanswered}\n`);
  });
}

export const SNAPSHOT_COLUMNS = ['SNAPSHOT ID', 'NAME', 'SOURCE VOLUME', 'SIZE', 'NODE', 'CREATED'];

export function snapshotRows(snapshots: ListedSnapshot[]): string[][] {
  return snapshots.map((s) => [
    s.snapshotId,
    s.name ?? '',
    s.sourceVolumeId,
    formatBytes(s.sizeBytes),
    s.nodeId,
    s.createdAt,
  ]);
}

function addSnapshotOptions(command: Command): Command {
  command.option(
    '--timeout <seconds>',
    'how long one attempt waits for the workflow before saying it still runs',
    '30',
  );
  return addOperatorOptions(command);
}

function waitMs(flags: { timeout: string }): number {
  const seconds = Number(flags.timeout);
  if (!Number.isFinite(seconds) || seconds <= 0)
    throw new Error(`--timeout: "${flags.timeout}" is not a number of seconds`);
  return seconds * 1000;
}

/** The driver's answers read as the volume commands print them: `<gRPC code>: <message>` (csi/errors.ts maps). */
async function withSnapshots<T>(
  flags: OperatorFlags,
  body: (operations: SnapshotOperations) => Promise<T>,
): Promise<T> {
  try {
    return await withTemporalClient(flags, (client) => body(new SnapshotOperations(client, flags.driverName)));
  } catch (error) {
    if (!(error instanceof DriverError) && !(error instanceof WorkflowFailedError)) throw error;
    const answer = toGrpcStatus(error);
    throw new Error(`${status[answer.code]}: ${answer.message}`);
  }
}
