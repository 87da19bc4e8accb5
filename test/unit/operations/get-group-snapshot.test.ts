import type { Client } from '@temporalio/client';
import { formatGroupSnapshotId, formatSnapshotId, formatVolumeId } from '../../../common/names';
import { SnapshotOperations } from '../../../operations/snapshot-operations';
import type { ListedSnapshot, ListSnapshotsPage } from '../../../workflows/listing';

/**
 * GetVolumeGroupSnapshot reads the node's answer page after page: an agent of the previous release ignores the group
 * filter and lists its whole pool, so the group's members may come on a later page than the first. (The paging
 * itself, workflows and node answers, is tested against the real server in test/integration/snapshot-paging.test.ts;
 * here the pages are given, to put the members where the first page does not reach.)
 */
describe('GetVolumeGroupSnapshot over a listing of more than one page', () => {
  const where = { nodeId: 'node-1', poolIdPrefix: '0123456789abcdef' };
  const groupId = formatGroupSnapshotId({ ...where, key: 'a'.repeat(32) });
  const snapshot = (key: string, group?: string): ListedSnapshot => ({
    snapshotId: formatSnapshotId({ ...where, key }),
    name: `snap-${key.slice(0, 4)}`,
    sourceVolumeId: formatVolumeId({ ...where, key: key.replace(/./, 'f') }),
    nodeId: where.nodeId,
    sizeBytes: 1024,
    createdAt: '2026-12-05T00:00:00.000Z',
    ...(group ? { groupSnapshotId: group } : {}),
  });
  const strangers = Array.from({ length: 3 }, (_, index) => snapshot(`${index}`.repeat(32)));
  const members = [snapshot('b'.repeat(32), groupId), snapshot('c'.repeat(32), groupId)];

  function operationsListing(pages: ListSnapshotsPage[]): { operations: SnapshotOperations; asked: string[] } {
    const operations = new SnapshotOperations({} as Client, 'get-group.test.csi');
    const asked: string[] = [];
    jest.spyOn(operations, 'listPage').mockImplementation(async (after) => {
      asked.push(after);
      const page = pages[asked.length - 1];
      if (!page) throw new Error(`no page ${asked.length} (after "${after}")`);
      return page;
    });
    return { operations, asked };
  }

  const page = (snapshots: ListedSnapshot[], nextToken: string, unreachable = false): ListSnapshotsPage => ({
    snapshots,
    nextToken,
    answeredNodes: unreachable ? [] : [where.nodeId],
    unreachableNodes: unreachable ? [where.nodeId] : [],
  });

  it("finds the members on the second page, as an old agent's whole-pool answer puts them", async () => {
    const { operations, asked } = operationsListing([page(strangers, strangers[2]!.snapshotId), page(members, '')]);
    const got = await operations.getGroup(
      groupId,
      members.map((member) => member.snapshotId),
    );
    expect(got.map((member) => member.snapshotId)).toEqual(members.map((member) => member.snapshotId));
    expect(asked).toEqual(['', strangers[2]!.snapshotId]);
  });

  it('is UNAVAILABLE, never NOT_FOUND, when the node does not answer a later page', async () => {
    const { operations } = operationsListing([page(strangers, strangers[2]!.snapshotId), page([], '', true)]);
    await expect(operations.getGroup(groupId, [])).rejects.toMatchObject({ type: 'Unavailable' });
  });
});
