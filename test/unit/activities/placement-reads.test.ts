import type { NodeRecordView } from '../../../node-records/reads';
import { PlacementReads, type RecordSource } from '../../../activities/placement';

function view(nodeId: string): NodeRecordView {
  return {
    nodeId,
    node: {
      nodeId,
      backend: 'dir',
      poolId: `pool-${nodeId}`,
      capacityBytes: 100,
      availableBytes: 100,
      volumeCount: 0,
      agentVersion: 'test',
      live: true,
      firstSeen: 0,
      lastHeartbeat: 0,
    },
  };
}

/** A record source that counts its reads and answers from a table the test changes. */
function countingSource(table: Map<string, NodeRecordView>) {
  const counts = { record: 0, liveSample: 0 };
  let failNext = false;
  const source: RecordSource = {
    async record(nodeId) {
      counts.record++;
      if (failNext) {
        failNext = false;
        throw new Error('Temporal unavailable');
      }
      return table.get(nodeId);
    },
    async liveSample(limit) {
      counts.liveSample++;
      return [...table.values()].slice(0, limit);
    },
    async recentSample(limit) {
      return [...table.values()].slice(0, limit);
    },
  };
  return { source, counts, failOnce: () => (failNext = true) };
}

describe('PlacementReads', () => {
  beforeEach(() => jest.useFakeTimers({ now: 1_000_000 }));
  afterEach(() => jest.useRealTimers());

  it('shares one read among a burst of creates and reads again once it is older than its age limit', async () => {
    const table = new Map([['a', view('a')]]);
    const { source, counts } = countingSource(table);
    const reads = new PlacementReads(source, 1_000);
    const burst = await Promise.all(Array.from({ length: 20 }, () => reads.record('a')));
    expect(burst.every((answer) => answer?.nodeId === 'a')).toBe(true);
    expect(counts.record).toBe(1);
    jest.advanceTimersByTime(999);
    await reads.record('a');
    expect(counts.record).toBe(1);
    jest.advanceTimersByTime(2);
    await reads.record('a');
    expect(counts.record).toBe(2);
  });

  it('never keeps a missing record: a node that registers now is seen by the next create', async () => {
    const table = new Map<string, NodeRecordView>();
    const { source, counts } = countingSource(table);
    const reads = new PlacementReads(source, 60_000);
    expect(await reads.record('new')).toBeUndefined();
    table.set('new', view('new'));
    expect((await reads.record('new'))?.nodeId).toBe('new');
    expect(counts.record).toBe(2);
  });

  it('never keeps a failed read', async () => {
    const { source, counts, failOnce } = countingSource(new Map([['a', view('a')]]));
    const reads = new PlacementReads(source, 60_000);
    failOnce();
    await expect(reads.record('a')).rejects.toThrow('Temporal unavailable');
    expect((await reads.record('a'))?.nodeId).toBe('a');
    expect(counts.record).toBe(2);
  });

  it('lists live records from visibility at most once per age limit', async () => {
    const { source, counts } = countingSource(
      new Map([
        ['a', view('a')],
        ['b', view('b')],
      ]),
    );
    const reads = new PlacementReads(source, 1_000);
    await Promise.all([reads.liveSample(64), reads.liveSample(64), reads.liveSample(64)]);
    expect(counts.liveSample).toBe(1);
    jest.advanceTimersByTime(1_001);
    expect((await reads.liveSample(64)).map((entry) => entry.nodeId)).toEqual(['a', 'b']);
    expect(counts.liveSample).toBe(2);
  });
});
