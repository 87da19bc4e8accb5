import { formatSnapshotId, formatVolumeId } from '../../../common/names';
import { describeDeleteOutcome, describeSnapshotDeleteOutcome } from '../../../cli/delete-outcome-text';
import { describeUnanswered } from '../../../cli/list-all-volumes';
import { checkSnapshotId, checkSnapshotName, checkSourceVolumeId } from '../../../cli/snapshot-input';
import { SNAPSHOT_COLUMNS, snapshotRows } from '../../../cli/snapshots-command';

const PARTS = { nodeId: 'node-1', poolIdPrefix: '0123456789abcdef', key: 'fedcba9876543210fedcba9876543210' };
const VOLUME = formatVolumeId(PARTS);
const SNAPSHOT = formatSnapshotId(PARTS);

describe('snapshots command input', () => {
  it('takes the IDs this driver issues and answers their parts', () => {
    expect(checkSourceVolumeId(VOLUME)).toEqual(PARTS);
    expect(checkSnapshotId(SNAPSHOT)).toEqual(PARTS);
    expect(checkSnapshotName('snap-1')).toBe('snap-1');
  });

  it('refuses empty and ill-formed IDs with what was wrong, a snapshot ID for a volume and back', () => {
    expect(() => checkSourceVolumeId(undefined)).toThrow('--source: a volume ID is required');
    expect(() => checkSourceVolumeId('')).toThrow('--source: a volume ID is required');
    expect(() => checkSourceVolumeId(SNAPSHOT)).toThrow(
      `--source: "${SNAPSHOT}" is not a volume ID this driver issues (v1_<node>_<pool>_<key>)`,
    );
    expect(() => checkSnapshotId('')).toThrow(/^a snapshot ID is required$/);
    expect(() => checkSnapshotId(VOLUME)).toThrow(
      `"${VOLUME}" is not a snapshot ID this driver issues (s1_<node>_<pool>_<key>)`,
    );
    expect(() => checkSnapshotId(`${SNAPSHOT}0`)).toThrow(/is not a snapshot ID/);
  });

  it('refuses the names CreateSnapshot refuses, naming the flag', () => {
    expect(() => checkSnapshotName('')).toThrow('--name: name is required');
    expect(() => checkSnapshotName('a/b')).toThrow('--name: name "a/b" must not contain "/" or ".."');
    expect(() => checkSnapshotName('x'.repeat(254))).toThrow('--name: name is longer than 253 characters');
    expect(() => checkSnapshotName('a\nb')).toThrow(/control characters/);
  });
});

describe('snapshots command output', () => {
  it('says what a deletion found, as volumes delete does', () => {
    expect(describeSnapshotDeleteOutcome(SNAPSHOT, 'deleted')).toBe(`deleted ${SNAPSHOT}`);
    expect(describeSnapshotDeleteOutcome(SNAPSHOT, 'absent')).toBe(
      `nothing to delete: node node-1 has no snapshot ${SNAPSHOT} (deleted earlier, or never created)`,
    );
    expect(describeSnapshotDeleteOutcome(SNAPSHOT, 'pool-replaced')).toMatch(/earlier pool of node node-1/);
    expect(describeSnapshotDeleteOutcome(SNAPSHOT, 'node-forgotten', 'disk died')).toBe(
      `${SNAPSHOT} written off: node node-1 was forgotten (disk died); nothing was deleted on its disk`,
    );
    // The volume texts are unchanged by the sharing.
    expect(describeDeleteOutcome(VOLUME, 'absent')).toBe(
      `nothing to delete: node node-1 has no volume ${VOLUME} (deleted earlier, or never created)`,
    );
    expect(describeDeleteOutcome(VOLUME, undefined)).toMatch(/did not say what it found/);
  });

  it('lists a snapshot per row under its columns, and names the silent nodes', () => {
    const rows = snapshotRows([
      {
        snapshotId: SNAPSHOT,
        name: 'snap-1',
        sourceVolumeId: VOLUME,
        nodeId: 'node-1',
        sizeBytes: 64 * 1024 * 1024,
        createdAt: '2026-01-02T03:04:05.678Z',
      },
    ]);
    expect(SNAPSHOT_COLUMNS).toEqual(['SNAPSHOT ID', 'NAME', 'SOURCE VOLUME', 'SIZE', 'NODE', 'CREATED']);
    expect(rows).toEqual([[SNAPSHOT, 'snap-1', VOLUME, '64Mi', 'node-1', '2026-01-02T03:04:05.678Z']]);
    expect(describeUnanswered(['node-2'], 'snapshots')).toBe(
      'node node-2 did not answer: its snapshots are missing from this list',
    );
    expect(describeUnanswered(['a', 'b'])).toBe('nodes a, b did not answer: their volumes are missing from this list');
  });
});
