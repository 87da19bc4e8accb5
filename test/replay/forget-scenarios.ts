import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Client } from '@temporalio/client';
import { temporal as temporal_api } from '@temporalio/proto';
import { createWorkflowId, nodeRecordWorkflowId, parseVolumeId } from '../../common/names';
import { readNodeRecord } from '../../node-records/reads';
import { forgetNode } from '../../operations/forget-node';
import { startDevServer } from '../../temporal-dev/dev-server';
import { findFreePort } from '../../temporal-dev/free-port';
import { TestCluster } from '../support/cluster';
import { codeOf, createRequest, createVolume, deleteVolume, onNode, retryLikeCo } from '../support/csi-requests';
import { createSnapshotUntilReady } from '../support/snapshot-requests';
import { eventually } from '../support/eventually';

/**
 * Histories of a forgotten node's return and of a restore its forget ended, recorded for the replay test
 * (record-histories.ts calls this; `node dist/test/replay/forget-scenarios.js` records only these):
 * - `node-presence-answers-from-report` (`record-answers-from-report`): a record whose node returns to a write-off
 *   whose deletion keeps failing: the node answers from its report, turns live past the failing deletion, a round
 *   beside the live node fails too, and the next round (after its timer) deletes it;
 * - `create-volume-restore-forgotten` (`create-names-forgotten-nodes`): a restore whose completion on the
 *   snapshot's node is ended by that node's forget, answered NOT_FOUND.
 * Each runs on nodes of its own; returns fixture name -> workflow ID.
 */
export async function recordForgetScenarios(cluster: TestCluster, temporal: Client): Promise<Record<string, string>> {
  const clients = cluster.csi((await cluster.startController('controller-forget', ['--snapshots'])).endpoint);
  const scenario = new ForgetScenario(cluster, clients, temporal);
  await Promise.all([scenario.returnPastFailingWriteOff('node-r'), scenario.restoreEndedByForget('node-s')]);
  return {
    'node-presence-answers-from-report': nodeRecordWorkflowId(cluster.driverName, 'node-r'),
    'create-volume-restore-forgotten': createWorkflowId(cluster.driverName, 'pvc-restore-forgotten'),
  };
}

class ForgetScenario {
  constructor(
    private readonly cluster: TestCluster,
    private readonly clients: ReturnType<TestCluster['csi']>,
    private readonly temporal: Client,
  ) {}

  /** A written-off volume whose deletion fails (a file of it is immutable) until the node has turned live. */
  async returnPastFailingWriteOff(nodeId: string): Promise<void> {
    const agent = await this.cluster.startNode(nodeId);
    const request = createRequest('pvc-written-off', undefined, onNode(nodeId));
    const volumeId = (await retryLikeCo(() => createVolume(this.clients, request))).volume!.volume_id;
    const pinned = path.join(this.cluster.pool(nodeId), 'volumes', parseVolumeId(volumeId)!.key, 'pinned');
    fs.writeFileSync(pinned, 'x');
    execFileSync('chattr', ['+i', pinned]);
    try {
      await agent.stop();
      await this.live(nodeId, false);
      await forgetNode(this.temporal, this.cluster.driverName, nodeId, 'recorded');
      await retryLikeCo(() => deleteVolume(this.clients, volumeId));
      await this.cluster.startNode(nodeId, { waitReady: false });
      await this.live(nodeId, true);
      // A round beside the live node fails too: the record waits for the next (a timer), then it can delete.
      const record = this.temporal.workflow.getHandle(nodeRecordWorkflowId(this.cluster.driverName, nodeId));
      await eventually(
        `the record of ${nodeId} waits for its next round`,
        async () => (await record.fetchHistory()).events?.some((event) => event.timerStartedEventAttributes) ?? false,
        90_000,
      );
    } finally {
      execFileSync('chattr', ['-i', pinned]);
    }
    await eventually(
      `${nodeId} deleted what was written off`,
      async () => (await readNodeRecord(this.temporal, this.cluster.driverName, nodeId))?.writtenOff === undefined,
      90_000,
    );
  }

  /** The restore's first try dies after allocating; the forget of its node ends the completion there. */
  async restoreEndedByForget(nodeId: string): Promise<void> {
    const agent = await this.cluster.startNode(nodeId);
    const source = await retryLikeCo(() =>
      createVolume(this.clients, createRequest('pvc-source', undefined, onNode(nodeId))),
    );
    const snapshot = await createSnapshotUntilReady(this.clients, 'snap-source', source.volume!.volume_id);
    await agent.stop();
    const dying = await this.cluster.startNode(nodeId, { failpoints: 'create.after-allocate' });
    const restore = createRequest('pvc-restore-forgotten', undefined, {
      volume_content_source: { snapshot: { snapshot_id: snapshot.snapshot!.snapshot_id } },
      ...onNode(nodeId),
    });
    if ((await codeOf(createVolume(this.clients, restore, 4000))) !== 'ABORTED') throw new Error('expected a wait');
    await dying.exited;
    await this.live(nodeId, false);
    await forgetNode(this.temporal, this.cluster.driverName, nodeId, 'recorded');
    const handle = this.temporal.workflow.getHandle(createWorkflowId(this.cluster.driverName, 'pvc-restore-forgotten'));
    await eventually('the restore ends', async () => (await handle.describe()).status.name !== 'RUNNING', 90_000);
  }

  private live(nodeId: string, live: boolean) {
    return eventually(
      `${nodeId} is ${live ? 'live' : 'offline'}`,
      async () => (await readNodeRecord(this.temporal, this.cluster.driverName, nodeId))?.node?.live === live,
      90_000,
    );
  }
}

/** Records only these fixtures, on a Temporal dev server of its own. */
async function main(): Promise<void> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'dcsi-record-forget-'));
  const server = await startDevServer({ dataDir, port: await findFreePort(), headless: true });
  process.env.DURABLE_CSI_TEST_TEMPORAL = server.address;
  const cluster = new TestCluster('record-forget');
  try {
    const temporal = await cluster.temporal();
    const recordings = await recordForgetScenarios(cluster, temporal);
    const fixtures = path.join(__dirname, '..', '..', '..', 'test', 'fixtures', 'histories');
    for (const [name, workflowId] of Object.entries(recordings)) {
      const history = await temporal.workflow.getHandle(workflowId).fetchHistory();
      fs.writeFileSync(path.join(fixtures, `${name}.pb`), temporal_api.api.history.v1.History.encode(history).finish());
      process.stdout.write(`recorded ${name} (${history.events?.length ?? 0} events)\n`);
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
