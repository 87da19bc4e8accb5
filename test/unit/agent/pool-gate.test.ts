import { decidePool, type PoolGateInput } from '../../../agent/pool-gate';

const OLD = '6fac7ed6-60ac-4a52-abaa-bc86653b8178';
const NEW = '0b1c2d3e-4f50-4a61-8b72-9c83d94ea5fb';
const base: PoolGateInput = { nodeId: 'node-1', pool: '/pool', recheckSeconds: 10 };
const onDisk = (poolId: string, replaces?: string) => ({ poolId, createdAt: 'x', backend: 'dir', replaces });

describe('the pool gate', () => {
  it('opens (and makes) a pool on a node no record remembers a pool for', () => {
    expect(decidePool(base)).toEqual({ kind: 'open', fresh: {} });
    expect(decidePool({ ...base, onDisk: onDisk(NEW) })).toEqual({ kind: 'open', fresh: {} });
  });

  it('refuses a pool on a filesystem the backend may not run on first, whatever the identities say', () => {
    const unfit = '--dir-quota=project: pool /pool is on the ext4 filesystem mounted at /, which does not enforce';
    expect(decidePool({ ...base, unfit })).toEqual({ kind: 'refuse', message: unfit });
    expect(decidePool({ ...base, unfit, onDisk: onDisk(OLD), remembered: OLD })).toEqual({
      kind: 'refuse',
      message: unfit,
    });
  });

  it('with no record, refuses an empty directory whose node operations name a pool, and accepts that decision', () => {
    const gate = decidePool({ ...base, named: '6fac7ed660ac4a52' });
    expect(gate.kind === 'refuse' && gate.message).toContain(
      'volume or snapshot operations of node node-1 name pool 6fac7ed660ac4a52 (its record remembers none)',
    );
    expect(gate.kind === 'refuse' && gate.message).toContain('--accept-new-pool=6fac7ed660ac4a52');
    expect(decidePool({ ...base, named: '6fac7ed660ac4a52', accepted: OLD })).toMatchObject({
      kind: 'open',
      fresh: { replaces: '6fac7ed660ac4a52' },
    });
  });

  it('with no record, opens a pool found on disk whatever the operations name (the record was lost, not the disk)', () => {
    expect(decidePool({ ...base, onDisk: onDisk(NEW), named: '6fac7ed660ac4a52' })).toEqual({
      kind: 'open',
      fresh: {},
    });
  });

  it('opens the pool the record remembers', () => {
    expect(decidePool({ ...base, onDisk: onDisk(OLD), remembered: OLD })).toEqual({ kind: 'open', fresh: {} });
  });

  it('refuses an empty directory on a node whose record remembers a pool, saying how to decide', () => {
    const gate = decidePool({ ...base, remembered: OLD });
    expect(gate.kind).toBe('refuse');
    expect(gate.kind === 'refuse' && gate.message).toContain(`--accept-new-pool=${OLD}`);
    expect(gate.kind === 'refuse' && gate.message).toContain('mount it there');
  });

  it('refuses another pool than the one remembered, unless the decision was recorded in it', () => {
    expect(decidePool({ ...base, onDisk: onDisk(NEW), remembered: OLD }).kind).toBe('refuse');
    expect(decidePool({ ...base, onDisk: onDisk(NEW, OLD), remembered: OLD })).toEqual({ kind: 'open', fresh: {} });
  });

  it('makes a new pool when the decision names the remembered identity, in full or by its 16 hex digits', () => {
    for (const accepted of [OLD, OLD.toUpperCase(), '6fac7ed660ac4a52']) {
      const gate = decidePool({ ...base, remembered: OLD, accepted });
      expect(gate).toMatchObject({ kind: 'open', fresh: { replaces: OLD } });
    }
  });

  it('decides nothing when the decision names another identity', () => {
    const gate = decidePool({ ...base, remembered: OLD, accepted: NEW });
    expect(gate.kind === 'refuse' && gate.message).toContain(`--accept-new-pool names ${NEW}`);
  });
});
