import type { Client } from '@temporalio/client';
import { temporal as temporal_api } from '@temporalio/proto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createWorkflowId, deleteWorkflowId, nodeRecordWorkflowId, renewRecordSignal } from '../../common/names';
import { readNodeRecord } from '../../node-records/reads';
import { forgetNode } from '../../operations/forget-node';
import { startDevServer } from '../../temporal-dev/dev-server';
import { findFreePort } from '../../temporal-dev/free-port';

import { TestCluster } from '../support/cluster';
import { codeOf, createRequest, createVolume, deleteVolume, onNode, retryLikeCo } from '../support/csi-requests';
import { call, withDeadline } from '../../csi/client';
import { recordCreateScenarios } from './create-scenarios';
import { recordSnapshotScenarios, type Recording } from './snapshot-scenarios';
import { recordForgetScenarios } from './forget-scenarios';
import { recordGroupSnapshotScenarios } from './group-snapshot-scenarios';
import { recordMoveScenarios } from './move-scenarios';
import { eventually } from '../support/eventually';

/**
 * Records the workflow histories that replay.test.ts replays against the current workflow code: a create, a create
 * with no room anywhere, a delete, a delete that waited for its node (its phase following the node), a delete for a
 * node with no record ended by `nodes forget`, an expansion, a node record through offline, online, a forget signal
 * refused while live and a renewal, creates whose first try dies on the node (create-scenarios.ts: completion,
 * forget, a notice naming another node), snapshots, a restore, every listing and a record deleting what was written
 * off (snapshot-scenarios.ts), group snapshots made, deleted and ended by a forget (group-snapshot-scenarios.ts), a
 * forgotten node's return and a restore its forget ended (forget-scenarios.ts), a move that copies and one that rolls
 * back, and a snapshot's move (move-scenarios.ts).
 * replay.test.ts fails when a workflow type or a patch has no fixture. Run it after a deliberate, patched() change
 * to workflow code (docs/workflow-changes.md): `node dist/test/replay/record-histories.js`. The histories of a
 * release stay in a folder of their own (release-0.2.0/ once a later change records over these), replayed too.
 */
export const FIXTURES = path.join(__dirname, '..', '..', '..', 'test', 'fixtures', 'histories');

async function main(): Promise<void> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'dcsi-record-'));
  const server = await startDevServer({ dataDir, port: await findFreePort(), headless: true });
  process.env.DURABLE_CSI_TEST_TEMPORAL = server.address;
  const cluster = new TestCluster('record');
  try {
    await cluster.startNode('node-1');
    const node2 = await cluster.startNode('node-2');
    const controller = await cluster.startController('controller', ['--snapshots']);
    const clients = cluster.csi(controller.endpoint);
    // The creates that die on their node, and the snapshots, run on nodes of their own, alongside the rest.
    const createScenarios = recordCreateScenarios(cluster, clients, await cluster.temporal());
    createScenarios.catch(() => undefined); // awaited below; a failure there must not go unhandled meanwhile
    const snapshotScenarios = recordSnapshotScenarios(cluster, clients, await cluster.temporal());
    snapshotScenarios.catch(() => undefined);
    const forgetScenarios = recordForgetScenarios(cluster, await cluster.temporal());
    forgetScenarios.catch(() => undefined);
    const groupScenarios = recordGroupSnapshotScenarios(
      cluster,
      clients,
      controller.endpoint,
      await cluster.temporal(),
    );
    groupScenarios.catch(() => undefined);
    const moveScenarios = recordMoveScenarios(cluster, clients, await cluster.temporal());
    moveScenarios.catch(() => undefined);
    const created = await retryLikeCo(() =>
      createVolume(clients, createRequest('pvc-recorded', undefined, onNode('node-1'))),
    );
    const waiting = await retryLikeCo(() =>
      createVolume(clients, createRequest('pvc-waiting', undefined, onNode('node-2'))),
    );
    const createdId = created.volume!.volume_id;
    const waitingId = waiting.volume!.volume_id;
    await retryLikeCo(() =>
      call((done) =>
        clients.controller.ControllerExpandVolume(
          { volume_id: createdId, capacity_range: { required_bytes: String(128 * 1024 * 1024) } },
          withDeadline(),
          done,
        ),
      ),
    );
    await retryLikeCo(() => deleteVolume(clients, createdId));
    const temporal = await cluster.temporal();
    // Issued while node-2 still counts as live (SIGKILL: its record notices within the heartbeat timeout), so the
    // deletion's phase follows the node: running, waiting-for-node, running.
    await node2.kill('SIGKILL');
    if ((await codeOf(deleteVolume(clients, waitingId, 4000))) !== 'ABORTED') throw new Error('expected a wait');
    await eventually(
      'node-2 offline',
      async () => (await readNodeRecord(temporal, cluster.driverName, 'node-2'))?.node?.live === false,
      90_000,
    );
    await new Promise((resolve) => setTimeout(resolve, 2000)); // the announcement reaches the deletion
    await cluster.startNode('node-2');
    await retryLikeCo(() => deleteVolume(clients, waitingId));
    await temporal.workflow.getHandle(nodeRecordWorkflowId(cluster.driverName, 'node-2')).signal(renewRecordSignal);

    // Larger than any pool: no node is placed, and the create says what it knows.
    const noRoom = createVolume(clients, createRequest('pvc-no-room', 1024 ** 4, onNode('node-1')));
    if ((await codeOf(noRoom)) !== 'RESOURCE_EXHAUSTED') throw new Error('expected no room');

    const unknownId = `v1_node-gone_0123456789abcdef_${'c'.repeat(32)}`;
    if ((await codeOf(deleteVolume(clients, unknownId, 4000))) !== 'ABORTED') throw new Error('expected a wait');
    await eventually(
      'the forget releasing the volume',
      async () => (await forgetNode(temporal, cluster.driverName, 'node-gone', 'recorded')).released.length > 0,
      90_000,
    );
    await retryLikeCo(() => deleteVolume(clients, unknownId));

    const expandId = `${cluster.driverName}/expand/${createdId}/${128 * 1024 * 1024}`;
    const nodeRecord = nodeRecordWorkflowId(cluster.driverName, 'node-2');
    const recordings: Record<string, Recording> = {
      ...Object.fromEntries(
        Object.entries({
          'create-volume': createWorkflowId(cluster.driverName, 'pvc-recorded'),
          'create-volume-no-room': createWorkflowId(cluster.driverName, 'pvc-no-room'),
          'delete-volume': deleteWorkflowId(cluster.driverName, createdId),
          'delete-volume-waiting-for-node': deleteWorkflowId(cluster.driverName, waitingId),
          'delete-volume-unknown-node': deleteWorkflowId(cluster.driverName, unknownId),
          'expand-volume': expandId,
          ...(await createScenarios),
          ...(await forgetScenarios),
        }).map(([name, workflowId]) => [name, { workflowId }]),
      ),
      // The node record continued as new: its first run holds the offline/online history.
      'node-presence': { workflowId: nodeRecord, runId: await firstRun(temporal, nodeRecord) },
      ...(await snapshotScenarios),
      ...(await groupScenarios),
      ...(await moveScenarios),
    };
    // `--only TEXT`: write only the fixtures whose names contain it (a new workflow type's, without re-recording the
    // released ones); every scenario still runs.
    const only = process.argv.includes('--only') ? process.argv[process.argv.indexOf('--only') + 1] : undefined;
    for (const [name, { workflowId, runId }] of Object.entries(recordings)) {
      if (only !== undefined && !name.includes(only)) continue;
      // Binary protobuf: the SDK's JSON helpers trip over its two protobufjs copies; the encoding does not.
      const history = await temporal.workflow.getHandle(workflowId, runId).fetchHistory();
      const events = history.events?.length ?? 0;
      const file = path.join(FIXTURES, `${name}.pb`);
      fs.mkdirSync(path.dirname(file), { recursive: true });
      fs.writeFileSync(file, temporal_api.api.history.v1.History.encode(history).finish());
      process.stdout.write(`recorded ${name} (${events} events)\n`);
    }
  } finally {
    await cluster.teardown();
    await server.stop();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

async function firstRun(temporal: Client, workflowId: string): Promise<string> {
  const runs: { runId: string; startTime: Date }[] = [];
  for await (const run of temporal.workflow.list({ query: `WorkflowId = "${workflowId}"` })) runs.push(run);
  const first = runs.sort((a, b) => a.startTime.getTime() - b.startTime.getTime())[0];
  if (!first) throw new Error(`no run of ${workflowId}`);
  return first.runId;
}

if (require.main === module) {
  main().catch((error: unknown) => {
    process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exit(1);
  });
}
