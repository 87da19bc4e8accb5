import * as grpc from '@grpc/grpc-js';
import type { Client } from '@temporalio/client';
import fs from 'node:fs';
import path from 'node:path';
import { createGroupSnapshotWorkflowId, deleteGroupSnapshotWorkflowId } from '../../common/names';
import { call, withDeadline, type CsiClients } from '../../csi/client';
import { parseEndpoint } from '../../csi/endpoint';
import type { CreateVolumeGroupSnapshotResponse__Output } from '../../csi/generated/csi/v1/CreateVolumeGroupSnapshotResponse';
import type { GroupControllerClient } from '../../csi/generated/csi/v1/GroupController';
import { csiPackage } from '../../csi/proto';
import { readNodeRecord } from '../../node-records/reads';
import { forgetNode } from '../../operations/forget-node';
import type { TestCluster } from '../support/cluster';
import { MiB, codeOf, createRequest, createVolume, onNode, retryLikeCo } from '../support/csi-requests';
import { eventually } from '../support/eventually';
import type { Recording } from './snapshot-scenarios';

/** The CSI GroupController of the controller at `endpoint`. */
export function groupClient(endpoint: string): GroupControllerClient {
  return new (csiPackage().GroupController)(parseEndpoint(endpoint).address, grpc.credentials.createInsecure());
}

function createGroup(group: GroupControllerClient, name: string, ids: string[], timeoutMs = 15_000) {
  return call<CreateVolumeGroupSnapshotResponse__Output>((done) =>
    group.CreateVolumeGroupSnapshot({ name, source_volume_ids: ids }, withDeadline(timeoutMs), done),
  );
}

function deleteGroup(group: GroupControllerClient, groupId: string, snapshotIds: string[], timeoutMs = 15_000) {
  return call<object>((done) =>
    group.DeleteVolumeGroupSnapshot(
      { group_snapshot_id: groupId, snapshot_ids: snapshotIds },
      withDeadline(timeoutMs),
      done,
    ),
  );
}

/**
 * Group snapshots on node-8, recorded for the replay test: a group made and deleted; then node-8 dies, a group's
 * deletion and another group's create wait for it, `nodes forget` ends both (each writes its members off), and
 * node-8 returns with the same pool: its record deletes the written-off members.
 */
export async function recordGroupSnapshotScenarios(
  cluster: TestCluster,
  clients: CsiClients,
  controllerEndpoint: string,
  temporal: Client,
): Promise<Record<string, Recording>> {
  const { driverName } = cluster;
  const group = groupClient(controllerEndpoint);
  try {
    const node = await cluster.startNode('node-8');
    const ids: string[] = [];
    for (const name of ['pvc-grouped-1', 'pvc-grouped-2']) {
      const made = await retryLikeCo(() => createVolume(clients, createRequest(name, 64 * MiB, onNode('node-8'))));
      ids.push(made.volume!.volume_id);
    }
    const deleted = (await retryLikeCo(() => createGroup(group, 'group-deleted', ids))).group_snapshot!;
    const deletedMembers = deleted.snapshots.map((snapshot) => snapshot.snapshot_id);
    await retryLikeCo(() => deleteGroup(group, deleted.group_snapshot_id, deletedMembers));
    const kept = (await retryLikeCo(() => createGroup(group, 'group-recorded', ids))).group_snapshot!;
    const keptMembers = kept.snapshots.map((snapshot) => snapshot.snapshot_id);

    await node.kill('SIGKILL');
    await eventually(
      'node-8 is offline',
      async () => (await readNodeRecord(temporal, driverName, 'node-8'))?.node?.live === false,
      90_000,
    );
    if ((await codeOf(deleteGroup(group, kept.group_snapshot_id, keptMembers, 4000))) !== 'ABORTED')
      throw new Error('expected a wait');
    if ((await codeOf(createGroup(group, 'group-forgotten', ids, 4000))) !== 'ABORTED')
      throw new Error('expected a wait');
    const waiting = [
      deleteGroupSnapshotWorkflowId(driverName, kept.group_snapshot_id),
      createGroupSnapshotWorkflowId(driverName, 'group-forgotten'),
    ];
    const released = new Set<string>();
    await eventually(
      'the forget of node-8 reaches the group deletion and create',
      async () => {
        for (const id of (await forgetNode(temporal, driverName, 'node-8', 'recorded')).released) released.add(id);
        return waiting.every((id) => released.has(id));
      },
      90_000,
    );
    await retryLikeCo(() => deleteGroup(group, kept.group_snapshot_id, keptMembers));
    await cluster.startNode('node-8'); // the same pool returns: its record deletes the members written off
    const copies = path.join(cluster.pool('node-8'), 'snapshots', 'data');
    await eventually(
      'the written-off members are deleted on node-8',
      async () => fs.readdirSync(copies).length === 0,
      90_000,
    );

    return {
      'create-volume-group-snapshot': { workflowId: createGroupSnapshotWorkflowId(driverName, 'group-recorded') },
      'delete-volume-group-snapshot': {
        workflowId: deleteGroupSnapshotWorkflowId(driverName, deleted.group_snapshot_id),
      },
      'delete-volume-group-snapshot-forgotten': {
        workflowId: deleteGroupSnapshotWorkflowId(driverName, kept.group_snapshot_id),
      },
      'create-volume-group-snapshot-forgotten': {
        workflowId: createGroupSnapshotWorkflowId(driverName, 'group-forgotten'),
      },
    };
  } finally {
    group.close();
  }
}
