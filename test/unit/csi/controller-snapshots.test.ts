import type { ServerUnaryCall } from '@grpc/grpc-js';
import { FailureType } from '../../../common/failures';
import {
  formatSnapshotId,
  parseSnapshotId,
  formatVolumeId,
  parseVolumeId,
  type ForgottenNode,
} from '../../../common/names';
import { createSnapshotHandlers } from '../../../csi/controller-snapshots';
import { createGroupControllerService } from '../../../csi/group-controller-service';
import type { SnapshotLookup, SnapshotOperations } from '../../../operations/snapshot-operations';
import type { ListedSnapshot } from '../../../workflows/listing';

const PREFIX = '0123456789abcdef';
const key = (n: number) => n.toString(16).padStart(32, '0');

function listed(nodeId: string, n: number, source = 1): ListedSnapshot {
  return {
    snapshotId: formatSnapshotId({ nodeId, poolIdPrefix: PREFIX, key: key(n) }),
    name: `snap-${n}`,
    sourceVolumeId: formatVolumeId({ nodeId, poolIdPrefix: PREFIX, key: key(source) }),
    nodeId,
    sizeBytes: 1024,
    createdAt: '2026-01-02T03:04:05.678Z',
  };
}

const FORGOTTEN_A: ForgottenNode = { nodeId: 'node-a', reason: 'the disk died', at: '2026-01-02T03:04:05.678Z' };

const ALL = [listed('node-a', 1), listed('node-a', 2, 2), listed('node-a', 3), listed('node-b', 4)];

/**
 * A fake of what the handlers ask Temporal, a page as listSnapshotsPage cuts it: the lookups asked are recorded. A
 * lookup of a `forgotten` node lists nothing and carries the decision, as SnapshotOperations.listPage answers it.
 */
function fakeOperations(unreachable: string[] = [], forgotten: ForgottenNode[] = []) {
  const asked: (SnapshotLookup | undefined)[] = [];
  const matches = (snapshot: ListedSnapshot, lookup?: SnapshotLookup) =>
    !lookup ||
    (snapshot.nodeId === lookup.nodeId &&
      (!lookup.only.key || parseSnapshotId(snapshot.snapshotId)!.key === lookup.only.key) &&
      (!lookup.only.sourceKey || parseVolumeId(snapshot.sourceVolumeId)!.key === lookup.only.sourceKey));
  const operations = {
    async listPage(after: string, maxEntries: number, lookup?: SnapshotLookup) {
      asked.push(lookup);
      const decision = forgotten.find((node) => node.nodeId === lookup?.nodeId);
      if (decision)
        return { snapshots: [], unreachableNodes: [], answeredNodes: [], nextToken: '', forgotten: decision };
      const limit = maxEntries > 0 ? maxEntries : 1000;
      const matching = ALL.filter((s) => !unreachable.includes(s.nodeId) && s.snapshotId > after && matches(s, lookup));
      const snapshots = matching.slice(0, limit);
      return {
        snapshots,
        unreachableNodes: unreachable.filter((node) => !lookup || node === lookup.nodeId),
        answeredNodes: [],
        nextToken: matching.length > limit ? snapshots[snapshots.length - 1]!.snapshotId : '',
      };
    },
  } as unknown as SnapshotOperations;
  return { asked, handlers: createSnapshotHandlers(operations, { callWaitMs: 1000 }) };
}

const call = {
  sendMetadata: () => undefined,
  getDeadline: () => Infinity,
  cancelled: false,
} as unknown as ServerUnaryCall<unknown, unknown>;

const request = (fields: Partial<Record<string, unknown>> = {}) =>
  ({ max_entries: 0, starting_token: '', source_volume_id: '', snapshot_id: '', secrets: {}, ...fields }) as never;

describe('ListSnapshots', () => {
  it('pages through every snapshot in ID order with max_entries and next_token', async () => {
    const { handlers } = fakeOperations();
    const seen: string[] = [];
    let token = '';
    for (let page = 0; page < 5; page++) {
      const answer = await handlers.ListSnapshots(request({ max_entries: 3, starting_token: token }), call);
      seen.push(...answer.entries!.map((entry) => entry.snapshot!.snapshot_id!));
      token = answer.next_token ?? '';
      if (!token) break;
    }
    expect(seen).toEqual(ALL.map((s) => s.snapshotId));
  });

  it('answers one snapshot by ID or a source volume, asking only its node', async () => {
    const { asked, handlers } = fakeOperations();
    const one = await handlers.ListSnapshots(request({ snapshot_id: ALL[1]!.snapshotId }), call);
    expect(one.entries!.map((entry) => entry.snapshot)).toEqual([
      {
        snapshot_id: ALL[1]!.snapshotId,
        source_volume_id: ALL[1]!.sourceVolumeId,
        size_bytes: '1024',
        creation_time: { seconds: String(Date.parse('2026-01-02T03:04:05Z') / 1000), nanos: 678_000_000 },
        ready_to_use: true,
      },
    ]);
    const bySource = await handlers.ListSnapshots(request({ source_volume_id: ALL[0]!.sourceVolumeId }), call);
    expect(bySource.entries!.map((entry) => entry.snapshot!.snapshot_id)).toEqual([
      ALL[0]!.snapshotId,
      ALL[2]!.snapshotId,
    ]);
    expect(asked).toEqual([
      { nodeId: 'node-a', only: { poolIdPrefix: PREFIX, key: key(2) } },
      { nodeId: 'node-a', only: { poolIdPrefix: PREFIX, sourceKey: key(1) } },
    ]);
  });

  it('lists nothing for IDs this driver could not have issued, or of two nodes, asking no node', async () => {
    const { asked, handlers } = fakeOperations();
    expect((await handlers.ListSnapshots(request({ snapshot_id: 'no-such' }), call)).entries).toEqual([]);
    expect((await handlers.ListSnapshots(request({ source_volume_id: 'no-such' }), call)).entries).toEqual([]);
    const twoNodes = request({ snapshot_id: ALL[3]!.snapshotId, source_volume_id: ALL[0]!.sourceVolumeId });
    expect((await handlers.ListSnapshots(twoNodes, call)).entries).toEqual([]);
    expect(asked).toEqual([]);
  });

  it('answers a lookup whose node did not answer UNAVAILABLE, never an empty list', async () => {
    const { handlers } = fakeOperations(['node-a']);
    const byId = handlers.ListSnapshots(request({ snapshot_id: ALL[0]!.snapshotId }), call);
    await expect(byId).rejects.toMatchObject({
      type: FailureType.Unavailable,
      message: expect.stringContaining('node-a'),
    });
    const bySource = handlers.ListSnapshots(request({ source_volume_id: ALL[0]!.sourceVolumeId }), call);
    await expect(bySource).rejects.toMatchObject({ type: FailureType.Unavailable });
    // A listing of everything still answers what the other nodes hold (the header names the silent one).
    const all = await handlers.ListSnapshots(request({}), call);
    expect(all.entries!.map((entry) => entry.snapshot!.snapshot_id)).toEqual([ALL[3]!.snapshotId]);
  });

  it('answers a token it did not issue ABORTED and a negative max_entries INVALID_ARGUMENT', async () => {
    const { handlers } = fakeOperations();
    for (const token of [
      'x',
      's1_node-a_~x',
      'v1_node-a_~',
      formatVolumeId({ nodeId: 'node-a', poolIdPrefix: PREFIX, key: key(1) }),
    ]) {
      await expect(handlers.ListSnapshots(request({ starting_token: token }), call)).rejects.toMatchObject({
        type: FailureType.Aborted,
      });
    }
    // Past a node is a position this driver issues.
    const pastNodeA = await handlers.ListSnapshots(request({ starting_token: 's1_node-a_~' }), call);
    expect(pastNodeA.entries!.map((entry) => entry.snapshot!.snapshot_id)).toEqual([ALL[3]!.snapshotId]);
    await expect(handlers.ListSnapshots(request({ max_entries: -1 }), call)).rejects.toMatchObject({
      type: FailureType.InvalidArgument,
    });
  });
});

describe('CreateSnapshot and DeleteSnapshot', () => {
  it('refuse a missing name, source or ID, and parameters, before anything starts', async () => {
    const { handlers } = fakeOperations();
    const create = (fields: Record<string, unknown>) =>
      handlers.CreateSnapshot(
        { name: 'snap', source_volume_id: ALL[0]!.sourceVolumeId, parameters: {}, secrets: {}, ...fields } as never,
        call,
      );
    await expect(create({ name: '' })).rejects.toMatchObject({ type: FailureType.InvalidArgument });
    await expect(create({ source_volume_id: '' })).rejects.toMatchObject({ type: FailureType.InvalidArgument });
    await expect(create({ parameters: { a: 'b' } })).rejects.toMatchObject({ type: FailureType.InvalidArgument });
    await expect(handlers.DeleteSnapshot({ snapshot_id: '', secrets: {} } as never, call)).rejects.toMatchObject({
      type: FailureType.InvalidArgument,
    });
  });
});

describe('GetSnapshot', () => {
  const get = (handlers: ReturnType<typeof fakeOperations>['handlers'], snapshotId: string) =>
    handlers.GetSnapshot({ snapshot_id: snapshotId, secrets: {} } as never);

  it('answers the snapshot as ListSnapshots by ID does, asking only its node', async () => {
    const { asked, handlers } = fakeOperations();
    const { snapshot } = await get(handlers, ALL[1]!.snapshotId);
    const listed = await handlers.ListSnapshots(request({ snapshot_id: ALL[1]!.snapshotId }), call);
    expect(snapshot).toEqual(listed.entries![0]!.snapshot);
    expect(snapshot).toMatchObject({ snapshot_id: ALL[1]!.snapshotId, ready_to_use: true, size_bytes: '1024' });
    expect(asked[0]).toEqual({ nodeId: 'node-a', only: { poolIdPrefix: PREFIX, key: key(2) } });
  });

  it('answers a snapshot its node does not hold NOT_FOUND, naming the node', async () => {
    const { handlers } = fakeOperations();
    const gone = formatSnapshotId({ nodeId: 'node-a', poolIdPrefix: PREFIX, key: key(9) });
    await expect(get(handlers, gone)).rejects.toMatchObject({
      type: FailureType.NotFound,
      message: `snapshot ${gone} is not in node node-a's pool: it was deleted (or its pool replaced)`,
    });
  });

  it('answers a silent node UNAVAILABLE, never NOT_FOUND', async () => {
    const { handlers } = fakeOperations(['node-a']);
    await expect(get(handlers, ALL[0]!.snapshotId)).rejects.toMatchObject({
      type: FailureType.Unavailable,
      message: expect.stringContaining('node node-a holds the snapshots asked for and did not answer'),
    });
    // Only the silent node's snapshots: another node's answers.
    expect((await get(handlers, ALL[3]!.snapshotId)).snapshot!.snapshot_id).toBe(ALL[3]!.snapshotId);
  });

  it('answers a snapshot whose node was forgotten for good NOT_FOUND, naming the node and the reason', async () => {
    const { handlers } = fakeOperations(['node-a'], [FORGOTTEN_A]);
    await expect(get(handlers, ALL[0]!.snapshotId)).rejects.toMatchObject({
      type: FailureType.NotFound,
      message: `snapshot ${ALL[0]!.snapshotId} was on node node-a, forgotten for good (the disk died)`,
    });
  });

  it('answers an ID this driver could not have issued NOT_FOUND, asking no node; a missing ID INVALID_ARGUMENT', async () => {
    const { asked, handlers } = fakeOperations();
    for (const id of ['no-such', 's1_node-a_~x', ALL[0]!.sourceVolumeId, `${ALL[0]!.snapshotId}x`]) {
      await expect(get(handlers, id)).rejects.toMatchObject({
        type: FailureType.NotFound,
        message: expect.stringContaining('was not issued by this driver'),
      });
    }
    await expect(get(handlers, '')).rejects.toMatchObject({
      type: FailureType.InvalidArgument,
      message: 'snapshot_id is required',
    });
    expect(asked).toEqual([]);
  });
});

/**
 * Kubernetes' storage suite (v1.37, test/e2e/storage/utils/volume_group_snapshot.go) makes each VolumeGroupSnapshotClass
 * with its deletion policy in `parameters` too, so csi-snapshotter asks CreateVolumeGroupSnapshot with
 * `deletionPolicy: Delete` (or Retain): refused, every group of such a class failed for good (docs/storage-suite.md).
 */
describe('snapshot and group snapshot parameters', () => {
  const member = ALL[0]!;
  function groupHandlers() {
    const created: { name: string; ids: string[] }[] = [];
    const operations = {
      async create(name: string) {
        created.push({ name, ids: [member.sourceVolumeId] });
        return member;
      },
      async createGroup(name: string, ids: string[]) {
        created.push({ name, ids });
        return { groupSnapshotId: 'g1_node-a_0123456789abcdef_' + key(9), nodeId: 'node-a', snapshots: [member] };
      },
    } as unknown as SnapshotOperations;
    const group = createGroupControllerService(operations, { callWaitMs: 1000 });
    if (!('CreateVolumeGroupSnapshot' in group)) throw new Error('no group snapshot calls with snapshots served');
    return {
      created,
      group,
      single: createSnapshotHandlers(operations, { callWaitMs: 1000 }),
    };
  }
  const createGroup = (handlers: ReturnType<typeof groupHandlers>, parameters: Record<string, string>) =>
    handlers.group.CreateVolumeGroupSnapshot(
      { name: 'group', source_volume_ids: [member.sourceVolumeId], parameters, secrets: {} } as never,
      call,
    );
  const createSnapshot = (handlers: ReturnType<typeof groupHandlers>, parameters: Record<string, string>) =>
    handlers.single.CreateSnapshot(
      { name: 'snap', source_volume_id: member.sourceVolumeId, parameters, secrets: {} } as never,
      call,
    );

  it("take a class's deletionPolicy (Delete or Retain) and ignore it", async () => {
    const handlers = groupHandlers();
    const made = await createGroup(handlers, { deletionPolicy: 'Delete' });
    expect(made.group_snapshot?.snapshots?.map((s) => s.snapshot_id)).toEqual([member.snapshotId]);
    await createGroup(handlers, { deletionPolicy: 'Retain' });
    await createSnapshot(handlers, { deletionPolicy: 'Retain' });
    expect(handlers.created.map((c) => c.name)).toEqual(['group', 'group', 'snap']);
  });

  it('refuse any other parameter, or another deletionPolicy, before anything starts', async () => {
    const handlers = groupHandlers();
    await expect(createGroup(handlers, { deletionPolicy: 'Delete', fsfreeze: 'false' })).rejects.toMatchObject({
      type: FailureType.InvalidArgument,
      message: 'parameters: this driver takes none for group snapshots but deletionPolicy (got fsfreeze)',
    });
    await expect(createGroup(handlers, { deletionPolicy: 'delete' })).rejects.toMatchObject({
      type: FailureType.InvalidArgument,
      message: expect.stringMatching(/^parameters\.deletionPolicy: "delete" is neither Delete nor Retain/),
    });
    await expect(createSnapshot(handlers, { a: 'b' })).rejects.toMatchObject({
      type: FailureType.InvalidArgument,
      message: 'parameters: this driver takes none for snapshots but deletionPolicy (got a)',
    });
    expect(handlers.created).toEqual([]);
  });
});
