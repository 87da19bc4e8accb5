import type { CustomObjectsApi } from '@kubernetes/client-node';
import {
  deleteSnapshotWorkflowId,
  formatGroupSnapshotId,
  formatSnapshotId,
  formatVolumeId,
} from '../../../common/names';
import { SNAPSHOT_CONTENTS, listDriverSnapshotContents } from '../../../kubernetes/snapshot-contents';
import type { DriverSnapshotContent } from '../../../kubernetes/snapshot-contents';
import { judgeSnapshots } from '../../../kubernetes/snapshot-orphans';
import type { ListedSnapshot } from '../../../workflows/listing';

const DRIVER = 'durable-csi.io';
const PREFIX = '0123456789abcdef';
const key = (n: number) => n.toString(16).padStart(32, '0');
const snapshotId = (nodeId: string, n: number) => formatSnapshotId({ nodeId, poolIdPrefix: PREFIX, key: key(n) });

function onPool(nodeId: string, n: number, name = `snapshot-uid-${n}`): ListedSnapshot {
  return {
    snapshotId: snapshotId(nodeId, n),
    name,
    sourceVolumeId: formatVolumeId({ nodeId, poolIdPrefix: PREFIX, key: key(100) }),
    nodeId,
    sizeBytes: 1024,
    createdAt: '2026-01-02T03:04:05.678Z',
  };
}

function content(name: string, handle: string | undefined, fields: Partial<DriverSnapshotContent> = {}) {
  return {
    name,
    snapshotHandle: handle,
    nodeId: handle?.split('_')[1],
    requestedName: undefined,
    deleting: false,
    ...fields,
  };
}

const deletion = (id: string, nodeId: string | null = id.split('_')[1] ?? null) => ({
  workflowId: deleteSnapshotWorkflowId(DRIVER, id),
  snapshotId: id,
  nodeId,
  startTime: new Date('2026-01-02T03:04:05.678Z'),
});

const judge = (input: Partial<Parameters<typeof judgeSnapshots>[0]>) =>
  judgeSnapshots({
    onPools: [],
    answeredNodes: ['node-a', 'node-b'],
    contents: [],
    pendingCreateNames: new Set(),
    pendingDeletions: [],
    ...input,
  });

describe('snapshot orphans', () => {
  it("a moving snapshot's source copy, named by no content once its VolumeSnapshot is switched, is no orphan", () => {
    const moving = onPool('node-a', 7);
    expect(judge({ onPools: [moving] }).unclaimedSnapshots).toEqual([moving]);
    const report = judge({ onPools: [moving], movingSnapshotIds: new Set([moving.snapshotId]) });
    expect(report.unclaimedSnapshots).toEqual([]);
  });

  it('a copy no content names is unclaimed; a content whose copy its answering node lacks is lost', () => {
    const report = judge({
      onPools: [onPool('node-a', 1), onPool('node-a', 2)],
      contents: [content('snapcontent-1', snapshotId('node-a', 1)), content('snapcontent-3', snapshotId('node-b', 3))],
    });
    expect(report.unclaimedSnapshots.map((s) => s.snapshotId)).toEqual([snapshotId('node-a', 2)]);
    expect(report.lostSnapshots).toEqual([
      { content: 'snapcontent-3', snapshotHandle: snapshotId('node-b', 3), nodeId: 'node-b' },
    ]);
    expect(report.uncheckedNodes).toEqual([]);
  });

  it('a copy being made or deleted is no orphan, nor is the content waiting for its handle or going', () => {
    const report = judge({
      onPools: [
        onPool('node-a', 1, 'snapshot-made-by-cli'),
        onPool('node-a', 2, 'snapshot-uid-2'),
        onPool('node-a', 3),
      ],
      contents: [
        content('snapcontent-2', undefined, { requestedName: 'snapshot-uid-2' }),
        content('snapcontent-4', snapshotId('node-a', 4), { deleting: true }),
        content('snapcontent-5', snapshotId('node-a', 5)),
      ],
      pendingCreateNames: new Set(['snapshot-made-by-cli']),
      pendingDeletions: [deletion(snapshotId('node-a', 3)), deletion(snapshotId('node-a', 5))],
    });
    expect(report).toEqual({
      unclaimedSnapshots: [],
      unclaimedGroupSnapshots: [],
      lostSnapshots: [],
      snapshotDeletionsWithoutContent: [deletion(snapshotId('node-a', 3))],
      uncheckedNodes: [],
    });
  });

  it('group members: a group nothing owns is one orphan with its members; a content, a running operation or a member content owns one', () => {
    const groupId = (n: number) => formatGroupSnapshotId({ nodeId: 'node-a', poolIdPrefix: PREFIX, key: key(n) });
    const member = (group: number, n: number, name: string) => ({
      ...onPool('node-a', n, `${name}/${key(100 + n)}`),
      groupSnapshotId: groupId(group),
    });
    const groupContent = (name: string, handle: string | undefined, requestedName?: string) => ({
      name,
      groupSnapshotHandle: handle,
      nodeId: handle ? 'node-a' : undefined,
      requestedName,
      deleting: false,
    });
    const report = judge({
      onPools: [
        member(1, 11, 'groupsnapshot-u1'), // named by a VolumeGroupSnapshotContent's handle
        member(2, 21, 'groupsnapshot-u2'), // its content waits for its handle
        member(3, 31, 'group-by-cli'), // its create is running
        member(4, 41, 'groupsnapshot-u4'), // its deletion is running
        member(5, 51, 'groupsnapshot-u5'), // one member has its VolumeSnapshotContent
        member(5, 52, 'groupsnapshot-u5'),
        member(6, 61, 'groupsnapshot-u6'), // nothing owns it
        member(6, 62, 'groupsnapshot-u6'),
        onPool('node-a', 7, 'snapshot-lone'), // a plain snapshot: unclaimed as before
      ],
      contents: [content('snapcontent-51', snapshotId('node-a', 51))],
      groupContents: [
        groupContent('groupcontent-1', groupId(1)),
        groupContent('groupcontent-2', undefined, 'groupsnapshot-u2'),
      ],
      pendingGroupCreateNames: new Set(['group-by-cli']),
      pendingGroupDeletionIds: new Set([groupId(4)]),
    });
    expect(report.unclaimedSnapshots.map((snapshot) => snapshot.name)).toEqual(['snapshot-lone']);
    expect(report.unclaimedGroupSnapshots).toEqual([
      {
        groupSnapshotId: groupId(6),
        name: 'groupsnapshot-u6',
        nodeId: 'node-a',
        memberSnapshotIds: [snapshotId('node-a', 61), snapshotId('node-a', 62)],
        sizeBytes: 2048,
      },
    ]);
  });

  it('a pending deletion whose content is gone is reported, whatever its node; one whose content remains is not', () => {
    const waiting = deletion(snapshotId('node-c', 6)); // its node is away: the deletion waits for it
    const report = judge({
      answeredNodes: ['node-a'],
      onPools: [onPool('node-a', 7)],
      contents: [
        content('snapcontent-7', snapshotId('node-a', 7), { deleting: true }),
        content('snapcontent-8', snapshotId('node-c', 8), { deleting: true }),
      ],
      pendingDeletions: [deletion(snapshotId('node-a', 7)), waiting, deletion(snapshotId('node-c', 8))],
    });
    expect(report.snapshotDeletionsWithoutContent).toEqual([waiting]);
    expect(report.unclaimedSnapshots).toEqual([]);
    expect(report.lostSnapshots).toEqual([]);
  });

  it('a node that did not answer proves nothing: its contents are unchecked, a handle of no node of ours is lost', () => {
    const report = judge({
      answeredNodes: ['node-a'],
      contents: [content('snapcontent-9', snapshotId('node-c', 9)), content('pre-provisioned', 'not-our-handle')],
    });
    expect(report.uncheckedNodes).toEqual(['node-c']);
    expect(report.lostSnapshots).toEqual([
      { content: 'pre-provisioned', snapshotHandle: 'not-our-handle', nodeId: null },
    ]);
  });
});

describe('VolumeSnapshotContents as the report reads them', () => {
  const api = (list: () => Promise<unknown>) => {
    const asked: unknown[] = [];
    const custom = {
      listClusterCustomObject: async (request: unknown) => {
        asked.push(request);
        return list();
      },
    } as unknown as CustomObjectsApi;
    return { asked, custom };
  };

  it("reads this driver's contents: the handle from the status, or a pre-provisioned one from the spec", async () => {
    const made = snapshotId('node-a', 1);
    const given = snapshotId('node-b', 2);
    const { asked, custom } = api(async () => ({
      items: [
        {
          metadata: { name: 'snapcontent-made' },
          spec: { driver: DRIVER, source: { volumeHandle: 'v1_x' }, volumeSnapshotRef: { uid: 'u-1' } },
          status: { snapshotHandle: made },
        },
        { metadata: { name: 'snapcontent-given' }, spec: { driver: DRIVER, source: { snapshotHandle: given } } },
        {
          metadata: { name: 'snapcontent-new', deletionTimestamp: '2026-01-01T00:00:00Z' },
          spec: { driver: DRIVER, volumeSnapshotRef: { uid: 'u-3' } },
        },
        {
          metadata: { name: 'other-driver' },
          spec: { driver: 'ebs.csi.aws.com' },
          status: { snapshotHandle: 'snap-1' },
        },
      ],
    }));
    expect(await listDriverSnapshotContents(custom, DRIVER)).toEqual([
      { name: 'snapcontent-made', snapshotHandle: made, nodeId: 'node-a', requestedName: undefined, deleting: false },
      { name: 'snapcontent-given', snapshotHandle: given, nodeId: 'node-b', requestedName: undefined, deleting: false },
      {
        name: 'snapcontent-new',
        snapshotHandle: undefined,
        nodeId: undefined,
        requestedName: 'snapshot-u-3',
        deleting: true,
      },
    ]);
    expect(asked).toEqual([{ group: 'snapshot.storage.k8s.io', version: 'v1', plural: 'volumesnapshotcontents' }]);
    expect(SNAPSHOT_CONTENTS.plural).toBe('volumesnapshotcontents');
  });

  it('answers not-installed for a 404 (no snapshot CRDs) and fails on anything else', async () => {
    const failing = (code: number) =>
      api(async () => {
        throw Object.assign(new Error(`HTTP ${code}`), { code });
      }).custom;
    expect(await listDriverSnapshotContents(failing(404), DRIVER)).toBe('not-installed');
    await expect(listDriverSnapshotContents(failing(403), DRIVER)).rejects.toThrow('HTTP 403');
  });
});
