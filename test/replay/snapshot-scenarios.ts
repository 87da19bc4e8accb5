import type { Client } from '@temporalio/client';
import fs from 'node:fs';
import path from 'node:path';
import {
  controlTaskQueue,
  createSnapshotWorkflowId,
  createWorkflowId,
  deleteSnapshotWorkflowId,
  inspectWorkflowId,
  listSnapshotsWorkflowId,
  listTransfersWorkflowId,
  listWorkflowId,
  nodeRecordWorkflowId,
  renewRecordSignal,
  parseVolumeId,
} from '../../common/names';
import type { CsiClients } from '../../csi/client';
import { readNodeRecord } from '../../node-records/reads';
import { forgetNode } from '../../operations/forget-node';
import type { TestCluster } from '../support/cluster';
import { MiB, codeOf, createRequest, createVolume, onNode, retryLikeCo } from '../support/csi-requests';
import { createSnapshot, deleteSnapshot } from '../support/snapshot-requests';
import { eventually } from '../support/eventually';

/** A history to keep: the workflow's latest run, or the one named. */
export interface Recording {
  workflowId: string;
  runId?: string;
}

/**
 * Snapshots on node-7, recorded for the replay test: a create, a restore from it (a create with a content source,
 * `copy-placement-asks-the-pool`), a deletion, then node-7 dies, a deletion and a create wait for it and `nodes
 * forget` ends both (each writes its copy off), and node-7 returns with the same pool: its record deletes the
 * written-off copies before it turns live (`record-deletes-written-off`). Also one run of every listing and of
 * inspectVolume, started as the controller and the CLI start them. Returns fixture name -> recording.
 */
export async function recordSnapshotScenarios(
  cluster: TestCluster,
  clients: CsiClients,
  temporal: Client,
): Promise<Record<string, Recording>> {
  const { driverName } = cluster;
  const node = await cluster.startNode('node-7');
  const created = await retryLikeCo(() =>
    createVolume(clients, createRequest('pvc-snapshotted', 64 * MiB, onNode('node-7'))),
  );
  const volumeId = created.volume!.volume_id;
  const kept = (await retryLikeCo(() => createSnapshot(clients, 'snap-recorded', volumeId))).snapshot!.snapshot_id;
  const fromSnapshot = { volume_content_source: { snapshot: { snapshot_id: kept } }, ...onNode('node-7') };
  await retryLikeCo(() => createVolume(clients, createRequest('pvc-restored', 64 * MiB, fromSnapshot)));
  const deleted = (await retryLikeCo(() => createSnapshot(clients, 'snap-deleted', volumeId))).snapshot!.snapshot_id;
  await retryLikeCo(() => deleteSnapshot(clients, deleted));
  const listings = await recordListings(driverName, temporal, volumeId);

  await node.kill('SIGKILL');
  await eventually(
    'node-7 is offline',
    async () => (await readNodeRecord(temporal, driverName, 'node-7'))?.node?.live === false,
    90_000,
  );
  if ((await codeOf(deleteSnapshot(clients, kept, 4000))) !== 'ABORTED') throw new Error('expected a wait');
  if ((await codeOf(createSnapshot(clients, 'snap-forgotten', volumeId, 4000))) !== 'ABORTED')
    throw new Error('expected a wait');
  const waiting = [deleteSnapshotWorkflowId(driverName, kept), createSnapshotWorkflowId(driverName, 'snap-forgotten')];
  const released = new Set<string>();
  await eventually(
    'the forget of node-7 reaches the snapshot deletion and create',
    async () => {
      for (const id of (await forgetNode(temporal, driverName, 'node-7', 'recorded')).released) released.add(id);
      return waiting.every((id) => released.has(id));
    },
    90_000,
  );
  await retryLikeCo(() => deleteSnapshot(clients, kept));
  await cluster.startNode('node-7'); // the same pool returns: its record deletes the copy written off
  const copies = path.join(cluster.pool('node-7'), 'snapshots', 'data');
  await eventually(
    'the written-off copy is deleted on node-7',
    async () => fs.readdirSync(copies).length === 0,
    90_000,
  );

  return {
    'create-snapshot': { workflowId: createSnapshotWorkflowId(driverName, 'snap-recorded') },
    'create-volume-restore': { workflowId: createWorkflowId(driverName, 'pvc-restored') },
    'delete-snapshot': { workflowId: deleteSnapshotWorkflowId(driverName, deleted) },
    'delete-snapshot-forgotten': { workflowId: deleteSnapshotWorkflowId(driverName, kept) },
    'create-snapshot-forgotten': { workflowId: createSnapshotWorkflowId(driverName, 'snap-forgotten') },
    'node-presence-written-off': await runThatDeletedWrittenOff(temporal, nodeRecordWorkflowId(driverName, 'node-7')),
    ...listings,
  };
}

/** One run of each listing and of inspectVolume, with the arguments the controller and the CLI give them. */
async function recordListings(driverName: string, temporal: Client, volumeId: string) {
  const run = async (type: string, workflowId: string, input: object) => {
    await temporal.workflow.execute(type, {
      workflowId,
      taskQueue: controlTaskQueue(driverName),
      args: [{ driverName, ...input }],
      workflowExecutionTimeout: '1m',
    });
    return { workflowId };
  };
  const page = { after: '', maxEntries: 0 };
  return {
    'list-volumes-page': await run('listVolumesPage', listWorkflowId(driverName, 'recorded-page'), page),
    'list-snapshots-page': await run('listSnapshotsPage', listSnapshotsWorkflowId(driverName, 'recorded-page'), page),
    'list-transfers-page': await run('listTransfersPage', listTransfersWorkflowId(driverName, 'recorded-page'), {
      after: '',
    }),
    'inspect-volume': await run(
      'inspectVolume',
      inspectWorkflowId(driverName, volumeId, 'recorded'),
      parseVolumeId(volumeId)!,
    ),
  };
}

/**
 * The node record continues as new: the run that deleted what was written off holds that history. It is renewed
 * first, so that run has ended and its history is whole.
 */
async function runThatDeletedWrittenOff(temporal: Client, workflowId: string): Promise<Recording> {
  await temporal.workflow.getHandle(workflowId).signal(renewRecordSignal);
  let found: Recording | undefined;
  await eventually(
    `an ended run of ${workflowId} that reported the written-off deletion`,
    async () => {
      for await (const run of temporal.workflow.list({ query: `WorkflowId = "${workflowId}"` })) {
        if (run.status.name === 'RUNNING') continue;
        const history = await temporal.workflow.getHandle(workflowId, run.runId).fetchHistory();
        const reported = history.events?.some(
          (event) => event.activityTaskScheduledEventAttributes?.activityType?.name === 'reportWrittenOffDeleted',
        );
        if (reported) found = { workflowId, runId: run.runId };
      }
      return found !== undefined;
    },
    90_000,
  );
  return found!;
}
