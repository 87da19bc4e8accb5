import type { NodeRecordView } from '../../../node-records/reads';
import { PlacementReads, type RecordSource, findCandidates, sampleLiveNodes } from '../../../activities/placement';

function view(nodeId: string, live: boolean): NodeRecordView {
  const node = { nodeId, backend: 'dir', poolId: `pool-${nodeId}`, capacityBytes: 100, availableBytes: 100 };
  return {
    nodeId,
    node: { ...node, volumeCount: 0, agentVersion: 'test', live, firstSeen: 0, lastHeartbeat: 0 },
  };
}

const request = { capacityBytes: 10, accessType: 'mount' as const, preferred: [] };

/** A create without topology samples visibility, which lags the records by seconds right after a node starts. */
describe('sampleLiveNodes', () => {
  it('describes the records visibility lists but does not list as live yet, and places on the live one', async () => {
    const records = new Map([['node-1', view('node-1', true)]]);
    const source = {
      record: async (nodeId: string) => records.get(nodeId),
      liveSample: async () => [],
      // Listed with the phase it started with (offline): its memo upsert is not visible yet.
      recentSample: async () => [view('node-1', false)],
    };
    const answer = await sampleLiveNodes(new PlacementReads(source as RecordSource), request);
    expect(answer.candidates.map((node) => node.nodeId)).toEqual(['node-1']);
  });

  it('says how many records visibility listed when none is live, so the message can be true', async () => {
    const source = {
      record: async (nodeId: string) => view(nodeId, false),
      liveSample: async () => [],
      recentSample: async () => [],
    };
    const answer = await sampleLiveNodes(new PlacementReads(source as RecordSource), request);
    expect(answer).toMatchObject({ candidates: [], offline: 0, listed: 0 });
  });
});

describe('findCandidates for a copy', () => {
  it("counts a node whose record shows too little room as full, unless the copy's pool is to decide", async () => {
    const full = { ...view('node-1', true), node: { ...view('node-1', true).node!, availableBytes: 0 } };
    const source = { record: async () => full, liveSample: async () => [], recentSample: async () => [] };
    const reads = new PlacementReads(source as RecordSource);
    const named = { ...request, requisite: ['node-1'], preferred: ['node-1'] };
    expect(await findCandidates(reads, named)).toMatchObject({ candidates: [], full: 1 });
    const copy = await findCandidates(reads, { ...named, askPoolWhenFull: true });
    expect(copy).toMatchObject({ full: 0, candidates: [{ nodeId: 'node-1' }] });
  });
});
