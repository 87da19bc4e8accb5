import type { CoreV1Api, CustomObjectsApi } from '@kubernetes/client-node';
import { WorkflowNotFoundError } from '@temporalio/client';
import fs from 'node:fs';
import path from 'node:path';
import { call, withDeadline } from '../../csi/client';
import type { CreateSnapshotResponse__Output } from '../../csi/generated/csi/v1/CreateSnapshotResponse';
import { deleteSnapshotWorkflowId, parseSnapshotId } from '../../common/names';
import { buildOrphanReport } from '../../kubernetes/orphan-report';
import { TestCluster } from '../support/cluster';
import { MiB, createRequest, createVolume, onNode, retryLikeCo } from '../support/csi-requests';
import { runCli } from '../support/run-cli';
import { testTemporalFlags } from '../support/test-temporal';
import { eventually } from '../support/eventually';

interface ListedJson {
  snapshots: { snapshotId: string; name: string; sourceVolumeId: string; nodeId: string; sizeBytes: number }[];
  unansweredNodes: string[];
}

interface StuckJson {
  operations: { workflowId: string; operation: string; volumeId: string | null; nodeId: string | null }[];
}

/**
 * `durable-csi snapshots` against a real controller, a real node agent on a dir pool and the real Temporal dev
 * server: the CLI's create is the controller's workflow (a CSI CreateSnapshot of the name answers the same
 * snapshot), bad input starts nothing, and a deletion whose node is stopped is reported and listed by
 * `volumes stuck` (and, no content naming it, by the orphan report) until the node returns and the copy is gone.
 */
describe('snapshots CLI', () => {
  const cluster = new TestCluster('snapshots-cli');
  afterAll(() => cluster.teardown());

  const cli = (...args: string[]) => runCli([...args, '--driver-name', cluster.driverName, ...testTemporalFlags()]);
  const json = async <T>(...args: string[]): Promise<T> => {
    const result = await cli(...args, '--output', 'json');
    if (result.code !== 0) throw new Error(`${args.join(' ')} exited ${result.code}: ${result.stderr}`);
    return JSON.parse(result.stdout) as T;
  };

  it('creates, lists and deletes a snapshot of a real volume; a stopped node leaves the deletion in volumes stuck', async () => {
    let node = await cluster.startNode('node-1');
    const clients = cluster.csi((await cluster.startController('controller', ['--snapshots'])).endpoint);
    const volume = await retryLikeCo(() => createVolume(clients, createRequest('pvc-cli', 64 * MiB, onNode('node-1'))));
    const volumeId = volume.volume!.volume_id;

    const made = await json<{ snapshotId: string; sourceVolumeId: string; nodeId: string; sizeBytes: number }>(
      'snapshots',
      'create',
      '--source',
      volumeId,
      '--name',
      'snap-cli',
    );
    expect(made).toMatchObject({ sourceVolumeId: volumeId, nodeId: 'node-1', sizeBytes: 64 * MiB });
    const snapshotId = made.snapshotId;
    const copy = path.join(cluster.pool('node-1'), 'snapshots', 'data', parseSnapshotId(snapshotId)!.key);
    expect(fs.existsSync(copy)).toBe(true);
    // The same name through CSI is the same workflow: the same snapshot, no second copy.
    const viaCsi = await call<CreateSnapshotResponse__Output>((done) =>
      clients.controller.CreateSnapshot({ name: 'snap-cli', source_volume_id: volumeId }, withDeadline(15_000), done),
    );
    expect(viaCsi.snapshot!.snapshot_id).toBe(snapshotId);
    expect(fs.readdirSync(path.join(cluster.pool('node-1'), 'snapshots', 'data'))).toHaveLength(1);
    const again = await cli('snapshots', 'create', '--source', volumeId, '--name', 'snap-cli');
    expect(again).toMatchObject({ code: 0, stdout: `${snapshotId}\t64Mi\tnode-1\n` });

    const listed = await json<ListedJson>('snapshots', 'list');
    expect(listed).toEqual({
      snapshots: [
        expect.objectContaining({ snapshotId, name: 'snap-cli', sourceVolumeId: volumeId, nodeId: 'node-1' }),
      ],
      unansweredNodes: [],
    });
    const bySource = await cli('snapshots', 'list', '--source', volumeId, '--json');
    expect((JSON.parse(bySource.stdout) as ListedJson).snapshots.map((s) => s.snapshotId)).toEqual([snapshotId]);
    const table = await cli('snapshots', 'list');
    expect(table.stdout).toMatch(/^SNAPSHOT ID +NAME +SOURCE VOLUME +SIZE +NODE +CREATED\n/);
    expect(table.stdout).toMatch(new RegExp(`\\n${snapshotId} +snap-cli +${volumeId} +64Mi +node-1 +\\d{4}-`));

    // Bad input: a precise message, a non-zero exit, and no workflow started.
    const client = await cluster.temporal();
    for (const [args, message] of [
      [['snapshots', 'delete', ''], /^durable-csi: a snapshot ID is required\n$/],
      [['snapshots', 'delete', volumeId], /^durable-csi: ".*" is not a snapshot ID this driver issues \(s1_/],
      [['snapshots', 'create', '--source', snapshotId, '--name', 'x'], /--source: ".*" is not a volume ID this driver/],
      [['snapshots', 'create', '--source', volumeId, '--name', 'a/b'], /--name: name "a\/b" must not contain "\/"/],
      [['snapshots', 'list', '--source', 'v1_nope'], /--source: "v1_nope" is not a volume ID/],
    ] as const) {
      const refused = await cli(...args);
      expect({ args, code: refused.code, stdout: refused.stdout }).toEqual({ args, code: 1, stdout: '' });
      expect(refused.stderr).toMatch(message);
    }
    await expect(
      client.workflow.getHandle(deleteSnapshotWorkflowId(cluster.driverName, volumeId)).describe(),
    ).rejects.toBeInstanceOf(WorkflowNotFoundError);

    // The node stopped, the deletion waits for it: reported like volumes delete does, and listed as stuck.
    await node.stop();
    const waiting = await cli('snapshots', 'delete', snapshotId, '--timeout', '3');
    expect(waiting).toMatchObject({ code: 1, stdout: '' });
    expect(waiting.stderr).toMatch(
      new RegExp(`^durable-csi: ABORTED: snapshot deletion of ${snapshotId} has waited \\d+s for node node-1 `),
    );
    expect(fs.existsSync(copy)).toBe(true);
    const stuck = await eventually(
      'two stuck operations listed',
      async () => {
        const found = (await json<StuckJson>('volumes', 'stuck')).operations;
        return found.length > 0 ? found : undefined;
      },
      30_000,
    );
    expect(stuck).toEqual([
      expect.objectContaining({
        operation: 'snapshot-delete',
        volumeId: snapshotId,
        nodeId: 'node-1',
        workflowId: deleteSnapshotWorkflowId(cluster.driverName, snapshotId),
      }),
    ]);
    const stuckTable = await cli('volumes', 'stuck');
    expect(stuckTable.stdout).toMatch(new RegExp(`\\nsnapshot-delete +${snapshotId} +node-1 +\\S+ +\\d+\\S*s `));
    const silent = await cli('snapshots', 'list', '--source', volumeId);
    expect(silent.code).toBe(1);
    expect(silent.stderr).toMatch(/^durable-csi: UNAVAILABLE: node node-1 holds the snapshots asked for/);
    // No VolumeSnapshotContent names the snapshot: the orphan report lists the deletion as one whose content is
    // gone; a cluster without the snapshot CRDs has it not checked.
    const orphans = await buildOrphanReport(client, kubernetes({ items: [] }), cluster.driverName);
    expect(orphans.snapshotDeletionsWithoutContent).toEqual([
      {
        workflowId: deleteSnapshotWorkflowId(cluster.driverName, snapshotId),
        snapshotId,
        nodeId: 'node-1',
        startTime: expect.any(Date),
      },
    ]);
    const noCrds = await buildOrphanReport(
      client,
      kubernetes(Object.assign(new Error('404'), { code: 404 })),
      cluster.driverName,
    );
    expect(noCrds).toMatchObject({ snapshotCrdsInstalled: false, snapshotDeletionsWithoutContent: [] });

    node = await cluster.startNode('node-1');
    const deleted = await eventually(
      'the snapshot deleted',
      async () => {
        const attempt = await cli('snapshots', 'delete', snapshotId);
        return attempt.code === 0 ? attempt : undefined;
      },
      60_000,
    );
    expect(deleted.stdout).toBe(`deleted ${snapshotId}\n`);
    expect(fs.existsSync(copy)).toBe(false);
    const after = await eventually(
      'every node answering the list',
      async () => {
        const current = await json<ListedJson>('snapshots', 'list');
        return current.unansweredNodes.length === 0 ? current : undefined;
      },
      30_000,
    );
    expect(after.snapshots).toEqual([]);
    expect((await cli('snapshots', 'list')).stdout).toBe('no snapshots\n');
    await eventually(
      'no stuck operation left',
      async () => (await json<StuckJson>('volumes', 'stuck')).operations.length === 0,
      30_000,
    );
  }, 300_000);
});

/** The Kubernetes API as the orphan report reads it: no PV, no claim, and this answer for VolumeSnapshotContents. */
function kubernetes(contents: { items: unknown[] } | Error) {
  return {
    core: {
      listPersistentVolume: async () => ({ items: [] }),
      listPersistentVolumeClaimForAllNamespaces: async () => ({ items: [] }),
    } as unknown as CoreV1Api,
    custom: {
      listClusterCustomObject: async () => {
        if (contents instanceof Error) throw contents;
        return contents;
      },
    } as unknown as CustomObjectsApi,
  };
}
