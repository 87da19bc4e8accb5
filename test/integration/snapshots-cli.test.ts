import type { CoreV1Api, CustomObjectsApi } from '@kubernetes/client-node';
import * as grpc from '@grpc/grpc-js';
import { WorkflowNotFoundError } from '@temporalio/client';
import fs from 'node:fs';
import path from 'node:path';
import { call, withDeadline } from '../../csi/client';
import { parseEndpoint } from '../../csi/endpoint';
import type { CreateSnapshotResponse__Output } from '../../csi/generated/csi/v1/CreateSnapshotResponse';
import type { CreateVolumeGroupSnapshotResponse__Output } from '../../csi/generated/csi/v1/CreateVolumeGroupSnapshotResponse';
import { csiPackage } from '../../csi/proto';
import { deleteSnapshotWorkflowId, parseSnapshotId } from '../../common/names';
import { printOrphanReport } from '../../cli/volumes-orphans-command';
import { buildOrphanReport } from '../../kubernetes/orphan-report';
import { listPendingOperations } from '../../operations/pending-operations';
import { GROUP_SNAPSHOT_CONTENTS } from '../../kubernetes/snapshot-contents';
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
 * A group snapshot's members nothing owns are reported as that group (what it is, what deletes it), and `snapshots
 * delete` of its ID deletes every member from the pool; groups a VolumeGroupSnapshotContent owns are not reported.
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

  it('reports a group snapshot nothing owns, with its members and what deletes it, and no group a content owns', async () => {
    await cluster.startNode('node-2');
    const { endpoint } = await cluster.startController('controller-groups', ['--snapshots']);
    const clients = cluster.csi(endpoint);
    const group = new (csiPackage().GroupController)(
      parseEndpoint(endpoint).address,
      grpc.credentials.createInsecure(),
    );
    const volumeIds: string[] = [];
    for (const name of ['pvc-g1', 'pvc-g2']) {
      const made = await retryLikeCo(() => createVolume(clients, createRequest(name, 16 * MiB, onNode('node-2'))));
      volumeIds.push(made.volume!.volume_id);
    }
    // Named as csi-snapshotter names them (groupsnapshot-<VolumeGroupSnapshot UID>); their members are the pool's
    // snapshot copies `<group name>/<volume key>`.
    const makeGroup = async (name: string) => {
      const made = await retryLikeCo(() =>
        call<CreateVolumeGroupSnapshotResponse__Output>((done) =>
          group.CreateVolumeGroupSnapshot({ name, source_volume_ids: volumeIds }, withDeadline(15_000), done),
        ),
      );
      return {
        id: made.group_snapshot!.group_snapshot_id,
        members: made.group_snapshot!.snapshots.map((m) => m.snapshot_id),
      };
    };
    const waiting = await makeGroup('groupsnapshot-uid-waiting'); // its content waits for its handle
    const owned = await makeGroup('groupsnapshot-uid-owned'); // its content names its handle
    const orphan = await makeGroup('groupsnapshot-uid-orphan'); // no content: a CO that lost it
    const copy = (snapshotId: string) =>
      path.join(cluster.pool('node-2'), 'snapshots', 'data', parseSnapshotId(snapshotId)!.key);
    expect([...waiting.members, ...owned.members, ...orphan.members].map((id) => fs.existsSync(copy(id)))).toEqual(
      Array(6).fill(true),
    );

    const client = await cluster.temporal();
    const groupContents = {
      items: [
        {
          metadata: { name: 'groupcontent-waiting' },
          spec: { driver: cluster.driverName, volumeGroupSnapshotRef: { uid: 'uid-waiting' } },
        },
        {
          metadata: { name: 'groupcontent-owned' },
          spec: { driver: cluster.driverName, volumeGroupSnapshotRef: { uid: 'uid-owned' } },
          status: { volumeGroupSnapshotHandle: owned.id },
        },
      ],
    };
    // The visibility store is seconds behind the workflows: until it shows the three creates ended, the report (rightly)
    // takes their groups for copies still being made. Seen in CI under load: the orphan not reported yet.
    await eventually(
      'the group creates ended in visibility',
      async () =>
        (await listPendingOperations(client, cluster.driverName)).every(
          (operation) => operation.type !== 'createVolumeGroupSnapshot',
        ),
      30_000,
    );
    const report = async () =>
      eventually(
        'every node answering the orphan report',
        async () => {
          const built = await buildOrphanReport(client, kubernetes({ items: [] }, groupContents), cluster.driverName);
          return built.uncheckedNodes.length === 0 ? built : undefined;
        },
        30_000,
      );
    const found = await report();
    // No member is offered as a snapshot to delete alone (DeleteSnapshot of a member is refused), and the members of
    // a group a content owns (or waits for) are nobody's orphans.
    expect(found.unclaimedSnapshots.map((snapshot) => snapshot.name)).toEqual([]);
    expect(found.unclaimedGroupSnapshots).toEqual([
      {
        groupSnapshotId: orphan.id,
        name: 'groupsnapshot-uid-orphan',
        nodeId: 'node-2',
        memberSnapshotIds: expect.arrayContaining(orphan.members),
        sizeBytes: 32 * MiB,
      },
    ]);
    expect(found.unclaimedGroupSnapshots[0]?.memberSnapshotIds).toHaveLength(2);
    const text = printed(() => printOrphanReport(found));
    expect(text).toContain('Unclaimed group snapshots: members on a pool, named by no VolumeGroupSnapshotContent');
    expect(text).toContain('`durable-csi snapshots delete GROUP_SNAPSHOT_ID` deletes the whole group');
    expect(text).toMatch(new RegExp(`\\n${orphan.id} +groupsnapshot-uid-orphan +node-2 +s1_\\S+,s1_\\S+ +32Mi\\n`));

    // What the report says to do: the group deleted whole, every member copy gone from the pool.
    const deleted = await cli('snapshots', 'delete', orphan.id);
    expect(deleted).toMatchObject({ code: 0, stdout: `deleted ${orphan.id}\n` });
    expect(orphan.members.map((id) => fs.existsSync(copy(id)))).toEqual([false, false]);
    expect([...waiting.members, ...owned.members].map((id) => fs.existsSync(copy(id)))).toEqual(Array(4).fill(true));
    expect((await report()).unclaimedGroupSnapshots).toEqual([]);
    const again = await cli('snapshots', 'delete', orphan.id);
    expect(again.code).toBe(0);
    expect(again.stdout).toMatch(
      new RegExp(`^nothing to delete: group snapshot ${orphan.id} is not in node node-2's pool`),
    );
    // Without the group snapshot CRDs no group can be claimed: both others are reported.
    const noGroupCrds = await buildOrphanReport(
      client,
      kubernetes({ items: [] }, Object.assign(new Error('404'), { code: 404 })),
      cluster.driverName,
    );
    expect(noGroupCrds.unclaimedGroupSnapshots.map((g) => g.groupSnapshotId).sort()).toEqual(
      [waiting.id, owned.id].sort(),
    );
    group.close();
  }, 300_000);
});

/** What a print function writes to stdout. */
function printed(print: () => void): string {
  const written: string[] = [];
  const write = jest.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => {
    written.push(String(chunk));
    return true;
  });
  try {
    print();
  } finally {
    write.mockRestore();
  }
  return written.join('');
}

/**
 * The Kubernetes API as the orphan report reads it: no PV, no claim, and these answers for VolumeSnapshotContents and
 * VolumeGroupSnapshotContents.
 */
function kubernetes(
  contents: { items: unknown[] } | Error,
  groupContents: { items: unknown[] } | Error = { items: [] },
) {
  return {
    core: {
      listPersistentVolume: async () => ({ items: [] }),
      listPersistentVolumeClaimForAllNamespaces: async () => ({ items: [] }),
    } as unknown as CoreV1Api,
    custom: {
      listClusterCustomObject: async ({ plural }: { plural: string }) => {
        const answer = plural === GROUP_SNAPSHOT_CONTENTS.plural ? groupContents : contents;
        if (answer instanceof Error) throw answer;
        return answer;
      },
    } as unknown as CustomObjectsApi,
  };
}
