import { temporal as temporal_api } from '@temporalio/proto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createWorkflowId, deleteWorkflowId, registryWorkflowId } from '../../common/names';
import { startDevServer } from '../../temporal-dev/dev-server';
import { findFreePort } from '../../temporal-dev/free-port';

import { TestCluster } from '../support/cluster';
import { codeOf, createRequest, createVolume, deleteVolume, onNode, retryLikeCo } from '../support/csi-requests';
import { call, withDeadline } from '../../csi/client';

/**
 * Records the workflow histories that replay.test.ts replays against the current workflow code: a create, a
 * delete, a delete that waited for its node, an expansion and the registry. Run it after a deliberate,
 * patched() change to workflow code (docs/workflow-changes.md): `node dist/test/replay/record-histories.js`.
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
    const clients = cluster.csi((await cluster.startController()).endpoint);
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
    await node2.kill('SIGKILL');
    await new Promise((resolve) => setTimeout(resolve, 32_000)); // judged offline: the delete records a wait
    if ((await codeOf(deleteVolume(clients, waitingId, 4000))) !== 'ABORTED') throw new Error('expected a wait');
    await cluster.startNode('node-2');
    await retryLikeCo(() => deleteVolume(clients, waitingId));

    const temporal = await cluster.temporal();
    const expandId = `${cluster.driverName}/expand/${createdId}/${128 * 1024 * 1024}`;
    const recordings: Record<string, string> = {
      'create-volume': createWorkflowId(cluster.driverName, 'pvc-recorded'),
      'delete-volume': deleteWorkflowId(cluster.driverName, createdId),
      'delete-volume-waiting-for-node': deleteWorkflowId(cluster.driverName, waitingId),
      'expand-volume': expandId,
      'node-registry': registryWorkflowId(cluster.driverName),
    };
    fs.mkdirSync(FIXTURES, { recursive: true });
    for (const [name, workflowId] of Object.entries(recordings)) {
      // Binary protobuf: the SDK's JSON helpers trip over its two protobufjs copies; the encoding does not.
      const history = await temporal.workflow.getHandle(workflowId).fetchHistory();
      const events = history.events?.length ?? 0;
      fs.writeFileSync(path.join(FIXTURES, `${name}.pb`), temporal_api.api.history.v1.History.encode(history).finish());
      process.stdout.write(`recorded ${name} (${events} events)\n`);
    }
  } finally {
    await cluster.teardown();
    await server.stop();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

if (require.main === module) {
  main().catch((error: unknown) => {
    process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exit(1);
  });
}
