import {
  MAX_NODE_ID_LENGTH,
  SNAPSHOT_ID_MAX_BYTES,
  formatGroupSnapshotId,
  formatSnapshotId,
  parseGroupSnapshotId,
  parseSnapshotId,
  formatVolumeId,
  type SnapshotIdParts,
} from '../../../common/names';
import { newSnapshotKey } from '../../../operations/snapshot-key';

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
  it('are 32 hex digits, a new one each time (one per create run: an ID names one copy only)', () => {
    const keys = Array.from({ length: 100 }, () => newSnapshotKey());
    for (const key of keys) {
      expect(key).toMatch(/^[0-9a-f]{32}$/);
      expect(parseSnapshotId(formatSnapshotId({ ...PARTS, key }))).toBeDefined();
    }
    expect(new Set(keys).size).toBe(keys.length);
  });
});

describe('group snapshot IDs', () => {
  it('join g1, node, pool prefix and group key, parse back without a lookup, and are no snapshot or volume ID', () => {
    const id = formatGroupSnapshotId(PARTS);
    expect(id).toBe(`g1_worker-1_${PREFIX}_${KEY}`);
    expect(parseGroupSnapshotId(id)).toEqual(PARTS);
    expect(parseSnapshotId(id)).toBeUndefined();
    expect(parseGroupSnapshotId(formatSnapshotId(PARTS))).toBeUndefined();
    expect(parseGroupSnapshotId(formatVolumeId(PARTS))).toBeUndefined();
    const longest = formatGroupSnapshotId({ ...PARTS, nodeId: nodeIdOfLength(MAX_NODE_ID_LENGTH) });
    expect(Buffer.byteLength(longest)).toBeLessThanOrEqual(128);
    for (const bad of [
      '',
      'g1_nonsense',
      `g1_Worker_${PREFIX}_${KEY}`,
      `g1_w_${PREFIX}_${KEY.slice(1)}`,
      `g2_w_${PREFIX}_${KEY}`,
    ]) {
      expect(parseGroupSnapshotId(bad)).toBeUndefined();
    }
  });
});
