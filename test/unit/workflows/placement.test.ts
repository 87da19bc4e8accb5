import type { NodeView } from '../../../common/names';
import { rankCandidates } from '../../../activities/placement';

const GI = 1024 ** 3;

function node(nodeId: string, availableGi: number, live = true): NodeView {
  return {
    nodeId,
    poolId: `pool-${nodeId}`,
    backend: 'dir',
    capacityBytes: 100 * GI,
    availableBytes: availableGi * GI,
    volumeCount: 0,
    agentVersion: '0.1.0',
    firstSeen: 1_000,
    lastHeartbeat: 2_000,
    live,
  };
}

function ids(nodes: NodeView[]): string[] {
  return nodes.map((n) => n.nodeId);
}

/** A seeded generator (mulberry32), so the weighted shuffle of non-preferred nodes is repeatable. */
function seeded(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

let random: () => number;

beforeEach(() => {
  random = seeded(42);
});

/** Ordering among non-preferred nodes is not part of the contract these tests pin down: compare as sets. */
function sorted(values: string[]): string[] {
  return [...values].sort();
}

describe('rankCandidates', () => {
  it('excludes nodes that are not live, however much room they have', () => {
    const nodes = [node('a', 10), node('b', 90, false), node('c', 20)];
    expect(sorted(ids(rankCandidates(nodes, { capacityBytes: GI, preferred: [] }, random)))).toEqual(['a', 'c']);
  });

  it('keeps a node whose record shows too little room only when its pool is to decide (a copy), and never one offline', () => {
    const nodes = [node('a', 0), node('b', 0, false)];
    expect(ids(rankCandidates(nodes, { capacityBytes: GI, preferred: [] }, random))).toEqual([]);
    const copy = { capacityBytes: GI, requisite: ['a', 'b'], preferred: ['a'], askPoolWhenFull: true };
    expect(ids(rankCandidates(nodes, copy, random))).toEqual(['a']);
  });

  it('excludes a preferred node that is not live', () => {
    const nodes = [node('a', 10), node('b', 90, false)];
    expect(ids(rankCandidates(nodes, { capacityBytes: GI, preferred: ['b'] }, random))).toEqual(['a']);
  });

  it('keeps only requisite nodes when a requisite set is given', () => {
    const nodes = [node('a', 10), node('b', 20), node('c', 30), node('d', 40)];
    const ranked = rankCandidates(
      nodes,
      { capacityBytes: GI, requisite: ['b', 'd', 'unknown'], preferred: [] },
      random,
    );
    expect(sorted(ids(ranked))).toEqual(['b', 'd']);
  });

  it('places anywhere when requisite is undefined', () => {
    const nodes = [node('a', 10), node('b', 20)];
    expect(sorted(ids(rankCandidates(nodes, { capacityBytes: GI, preferred: [] }, random)))).toEqual(['a', 'b']);
  });

  it('excludes a preferred node outside the requisite set', () => {
    const nodes = [node('a', 10), node('b', 20)];
    const ranked = rankCandidates(nodes, { capacityBytes: GI, requisite: ['a'], preferred: ['b', 'a'] }, random);
    expect(ids(ranked)).toEqual(['a']);
  });

  it('keeps only nodes with room for the volume; exactly enough room fits', () => {
    const exact = { ...node('exact', 0), availableBytes: 5 * GI };
    const short = { ...node('short', 0), availableBytes: 5 * GI - 1 };
    const nodes = [exact, short, node('roomy', 50), node('empty', 0)];
    expect(sorted(ids(rankCandidates(nodes, { capacityBytes: 5 * GI, preferred: [] }, random)))).toEqual([
      'exact',
      'roomy',
    ]);
  });

  it('puts preferred nodes first, in the order the CO gave, ahead of roomier nodes', () => {
    const nodes = [node('a', 90), node('b', 5), node('c', 80), node('d', 3), node('e', 70)];
    const ranked = ids(rankCandidates(nodes, { capacityBytes: GI, preferred: ['d', 'b'] }, random));
    expect(ranked).toHaveLength(5);
    expect(ranked.slice(0, 2)).toEqual(['d', 'b']);
    expect(sorted(ranked.slice(2))).toEqual(['a', 'c', 'e']);
  });

  it('skips preferred nodes that do not fit and keeps the CO order of the rest', () => {
    const nodes = [node('a', 50), node('b', 1), node('c', 8), node('d', 20)];
    const ranked = ids(rankCandidates(nodes, { capacityBytes: 2 * GI, preferred: ['b', 'c', 'missing', 'd'] }, random));
    expect(ranked.slice(0, 2)).toEqual(['c', 'd']);
    expect(ranked.slice(2)).toEqual(['a']);
  });

  it('keeps preferred nodes first and every other fitting node exactly once, whatever the random draws', () => {
    const nodes = [node('a', 90), node('b', 5), node('c', 80), node('d', 3), node('e', 70), node('f', 0)];
    const request = { capacityBytes: GI, preferred: ['d', 'b'] };
    const sources: (() => number)[] = [() => 0, () => 0.5, () => 0.999999, () => Number.MIN_VALUE];
    for (let seed = 1; seed <= 25; seed++) sources.push(seeded(seed));
    for (const source of sources) {
      const ranked = ids(rankCandidates(nodes, request, source));
      expect(ranked.slice(0, 2)).toEqual(['d', 'b']);
      expect(sorted(ranked.slice(2))).toEqual(['a', 'c', 'e']);
    }
  });

  it('returns no candidates when nothing fits', () => {
    const nodes = [node('a', 1), node('b', 100, false)];
    expect(rankCandidates(nodes, { capacityBytes: 2 * GI, preferred: ['a', 'b'] }, random)).toEqual([]);
    expect(rankCandidates([], { capacityBytes: 1, preferred: [] }, random)).toEqual([]);
  });

  it('returns the node views themselves and leaves the input array as it was', () => {
    const nodes = [node('a', 10), node('b', 20), node('c', 30)];
    const before = ids(nodes);
    const ranked = rankCandidates(nodes, { capacityBytes: GI, preferred: ['c'] }, random);
    expect(ids(nodes)).toEqual(before);
    expect(ranked[0]).toBe(nodes[2]);
    expect(sorted(ids(ranked))).toEqual(['a', 'b', 'c']);
  });
});
