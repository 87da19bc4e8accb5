import {
  MAX_NODE_ID_LENGTH,
  POOL_ID_PREFIX_LENGTH,
  VOLUME_ID_MAX_BYTES,
  formatVolumeId,
  ownsVolume,
  parseVolumeId,
  poolIdPrefix,
  type VolumeIdParts,
} from '../../../common/names';

const PREFIX = '0123456789abcdef';
const KEY = '0123456789abcdef0123456789abcdef';
const PARTS: VolumeIdParts = { nodeId: 'worker-1', poolIdPrefix: PREFIX, key: KEY };

/** A valid node ID of exactly `length` characters: starts and ends alphanumeric, dots and dashes inside. */
function nodeIdOfLength(length: number): string {
  return ('n' + 'a.b-'.repeat(length)).slice(0, length - 1) + '9';
}

describe('poolIdPrefix', () => {
  it('strips the dashes of a UUID and keeps its first 16 hex digits', () => {
    expect(poolIdPrefix('c0ffee00-1234-4abc-8def-0123456789ab')).toBe('c0ffee0012344abc');
    expect(poolIdPrefix('c0ffee00-1234-4abc-8def-0123456789ab')).toHaveLength(POOL_ID_PREFIX_LENGTH);
  });

  it('leaves an undashed identity alone apart from truncating it', () => {
    expect(poolIdPrefix('ffffffffffffffff0000')).toBe('ffffffffffffffff');
  });

  it('produces a prefix that formatVolumeId accepts', () => {
    const prefix = poolIdPrefix('9b1deb4d-3b7d-4bad-9bdd-2b0d7b3dcb6d');
    expect(prefix).toBe('9b1deb4d3b7d4bad');
    expect(parseVolumeId(formatVolumeId({ ...PARTS, poolIdPrefix: prefix }))?.poolIdPrefix).toBe(prefix);
  });
});

describe('formatVolumeId', () => {
  it('joins version, node, pool prefix and key with underscores', () => {
    expect(formatVolumeId(PARTS)).toBe(`v1_worker-1_${PREFIX}_${KEY}`);
  });

  it('round-trips through parseVolumeId', () => {
    const parts: VolumeIdParts = { nodeId: 'ip-10-0-1-17.ec2.internal', poolIdPrefix: 'fedcba9876543210', key: KEY };
    expect(parseVolumeId(formatVolumeId(parts))).toEqual(parts);
  });

  it('yields exactly the CSI limit of 128 bytes for the longest node ID', () => {
    const nodeId = nodeIdOfLength(MAX_NODE_ID_LENGTH);
    expect(nodeId).toHaveLength(75);
    const volumeId = formatVolumeId({ ...PARTS, nodeId });
    expect(Buffer.byteLength(volumeId, 'utf8')).toBe(128);
    expect(VOLUME_ID_MAX_BYTES).toBe(128);
    expect(parseVolumeId(volumeId)).toEqual({ ...PARTS, nodeId });
  });

  it.each<[string, Partial<VolumeIdParts>]>([
    ['a node ID with "_"', { nodeId: 'worker_1' }],
    ['an upper-case node ID', { nodeId: 'Worker-1' }],
    ['an empty node ID', { nodeId: '' }],
    ['a node ID one character too long', { nodeId: nodeIdOfLength(MAX_NODE_ID_LENGTH + 1) }],
    ['a short pool prefix', { poolIdPrefix: PREFIX.slice(1) }],
    ['an upper-case pool prefix', { poolIdPrefix: PREFIX.toUpperCase() }],
    ['a dashed pool prefix', { poolIdPrefix: '01234567-89abcde' }],
    ['a short key', { key: KEY.slice(1) }],
    ['an upper-case key', { key: KEY.toUpperCase() }],
    ['a non-hex key', { key: 'g'.repeat(32) }],
  ])('refuses %s', (_label, override) => {
    expect(() => formatVolumeId({ ...PARTS, ...override })).toThrow(/cannot form a volume ID/);
  });
});

describe('parseVolumeId', () => {
  it('parses a well-formed ID into its fields', () => {
    expect(parseVolumeId(`v1_node-a_${PREFIX}_${KEY}`)).toEqual({ nodeId: 'node-a', poolIdPrefix: PREFIX, key: KEY });
  });

  it('accepts a dotted node ID', () => {
    expect(parseVolumeId(`v1_node.example.com_${PREFIX}_${KEY}`)?.nodeId).toBe('node.example.com');
  });

  it.each<[string, string]>([
    ['the empty string', ''],
    ['another version', `v2_node-a_${PREFIX}_${KEY}`],
    ['an upper-case version', `V1_node-a_${PREFIX}_${KEY}`],
    ['three fields', `v1_node-a_${KEY}`],
    ['five fields', `v1_node-a_extra_${PREFIX}_${KEY}`],
    ['a trailing underscore', `v1_node-a_${PREFIX}_${KEY}_`],
    ['an upper-case key', `v1_node-a_${PREFIX}_${KEY.toUpperCase()}`],
    ['an upper-case pool prefix', `v1_node-a_${PREFIX.toUpperCase()}_${KEY}`],
    ['a 31-digit key', `v1_node-a_${PREFIX}_${KEY.slice(1)}`],
    ['a 33-digit key', `v1_node-a_${PREFIX}_${KEY}0`],
    ['a 15-digit pool prefix', `v1_node-a_${PREFIX.slice(1)}_${KEY}`],
    ['an upper-case node ID', `v1_Node-A_${PREFIX}_${KEY}`],
    ['an empty node ID', `v1__${PREFIX}_${KEY}`],
    ['a node ID starting with "-"', `v1_-node_${PREFIX}_${KEY}`],
    ['a node ID ending with "."', `v1_node._${PREFIX}_${KEY}`],
    ['a path', '../x'],
    ['a path in the node field', `v1_../x_${PREFIX}_${KEY}`],
    ['a slash in the node field', `v1_a/b_${PREFIX}_${KEY}`],
    ['a CSI volume handle of another driver', 'pvc-3f1c2d4e-1111-2222-3333-444455556666'],
  ])('returns undefined for %s', (_label, volumeId) => {
    expect(parseVolumeId(volumeId)).toBeUndefined();
  });

  it('returns undefined for a node ID with "_" (it splits into too many fields)', () => {
    expect(parseVolumeId(`v1_node_a_${PREFIX}_${KEY}`)).toBeUndefined();
  });

  it('returns undefined for a node ID longer than 75 characters', () => {
    const volumeId = `v1_${nodeIdOfLength(MAX_NODE_ID_LENGTH + 1)}_${PREFIX}_${KEY}`;
    expect(volumeId).toHaveLength(129);
    expect(parseVolumeId(volumeId)).toBeUndefined();
  });

  it('returns undefined for any 129-byte string, even one that is otherwise well formed', () => {
    const padded = `v1_${'a'.repeat(76)}_${PREFIX}_${KEY}`;
    expect(Buffer.byteLength(padded)).toBe(129);
    expect(parseVolumeId(padded)).toBeUndefined();
    expect(parseVolumeId('x'.repeat(129))).toBeUndefined();
  });
});

describe('ownsVolume', () => {
  const POOL = '3f1c2d4e-1111-2222-3333-444455556666';

  it('accepts the prefix of its own pool, dashes or not', () => {
    expect(ownsVolume(POOL, '3f1c2d4e11112222')).toBe(true);
  });

  it('refuses the prefix of a pool created later under the same path', () => {
    expect(ownsVolume(POOL, '3f1c2d4e11112223')).toBe(false);
  });
});
