import { MAX_NODE_ID_LENGTH } from '../../../common/node-id';
import { SNAPSHOT_ID_MAX_BYTES, formatSnapshotId, parseSnapshotId } from '../../../common/snapshot-id';
import type { SnapshotIdParts } from '../../../common/snapshot-id';
import { formatVolumeId } from '../../../common/volume-id';
import { snapshotKeyOf } from '../../../operations/snapshot-key';

const PREFIX = '0123456789abcdef';
const KEY = 'fedcba9876543210fedcba9876543210';
const PARTS: SnapshotIdParts = { nodeId: 'worker-1', poolIdPrefix: PREFIX, key: KEY };

function nodeIdOfLength(length: number): string {
  return ('n' + 'a.b-'.repeat(length)).slice(0, length - 1) + '9';
}

describe('snapshot IDs', () => {
  it('join version, node, pool prefix and key, and parse back without a lookup', () => {
    const id = formatSnapshotId(PARTS);
    expect(id).toBe(`s1_worker-1_${PREFIX}_${KEY}`);
    expect(parseSnapshotId(id)).toEqual(PARTS);
  });

  it('fit the CSI limit of 128 bytes with the longest node ID', () => {
    const id = formatSnapshotId({ ...PARTS, nodeId: nodeIdOfLength(MAX_NODE_ID_LENGTH) });
    expect(Buffer.byteLength(id)).toBeLessThanOrEqual(SNAPSHOT_ID_MAX_BYTES);
    expect(SNAPSHOT_ID_MAX_BYTES).toBe(128);
    expect(parseSnapshotId(id)?.nodeId).toHaveLength(MAX_NODE_ID_LENGTH);
  });

  it('refuse to form an ID from parts that could not be parsed back', () => {
    for (const parts of [
      { ...PARTS, nodeId: 'has_underscore' },
      { ...PARTS, nodeId: 'UPPER' },
      { ...PARTS, poolIdPrefix: 'short' },
      { ...PARTS, key: '../../etc/passwd' },
      { ...PARTS, key: KEY.toUpperCase() },
    ]) {
      expect(() => formatSnapshotId(parts)).toThrow(/cannot form a snapshot ID/);
    }
  });

  it('parse nothing this driver could not have issued, a volume ID included', () => {
    const volumeId = formatVolumeId({ ...PARTS });
    for (const id of [
      '',
      volumeId,
      `s2_worker-1_${PREFIX}_${KEY}`,
      `s1_worker-1_${PREFIX}_${KEY}_extra`,
      `s1_worker-1_${PREFIX}_${KEY.slice(1)}`,
      `s1__${PREFIX}_${KEY}`,
      `s1_${'a'.repeat(200)}_${PREFIX}_${KEY}`,
      `s1_worker-1_${PREFIX}_../${KEY.slice(3)}`,
    ]) {
      expect(parseSnapshotId(id)).toBeUndefined();
    }
  });
});

describe('snapshot keys', () => {
  const source = formatVolumeId({ nodeId: 'worker-1', poolIdPrefix: PREFIX, key: KEY });

  it('are 32 hex digits derived from the name and the source, the same on every replica', () => {
    expect(snapshotKeyOf('snap-1', source)).toMatch(/^[0-9a-f]{32}$/);
    expect(snapshotKeyOf('snap-1', source)).toBe(snapshotKeyOf('snap-1', source));
    expect(parseSnapshotId(formatSnapshotId({ ...PARTS, key: snapshotKeyOf('snap-1', source) }))).toBeDefined();
  });

  it('differ for another name or another source, and cannot be confused by where the boundary falls', () => {
    const other = formatVolumeId({ nodeId: 'worker-2', poolIdPrefix: PREFIX, key: KEY });
    const keys = new Set([
      snapshotKeyOf('snap-1', source),
      snapshotKeyOf('snap-2', source),
      snapshotKeyOf('snap-1', other),
      snapshotKeyOf('snap-1v', `1_${source.slice(2)}`),
    ]);
    expect(keys.size).toBe(4);
  });
});
