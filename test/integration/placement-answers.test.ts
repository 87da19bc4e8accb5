import { TestCluster } from '../support/cluster';
import { createRequest, createVolume, onNode } from '../support/csi-requests';

const block = [{ block: {}, access_mode: { mode: 'SINGLE_NODE_WRITER' as const } }];

/** What placement answers when it cannot place: codes that make the CO do the right thing, messages that are true. */
describe('placement answers', () => {
  const cluster = new TestCluster('placeans');
  let clients: ReturnType<TestCluster['csi']>;

  beforeAll(async () => {
    await cluster.startNode('node-1', { capacity: '2Gi' });
    clients = cluster.csi((await cluster.startController()).endpoint);
  });
  afterAll(() => cluster.teardown());

  it('a block request placed on a node without block support answers RESOURCE_EXHAUSTED (reschedule), saying why', async () => {
    // As WaitForFirstConsumer sends it: the selected node as requisite. INVALID_ARGUMENT would be final for the
    // PVC; RESOURCE_EXHAUSTED makes external-provisioner drop the selected node and the scheduler choose again.
    const request = { ...createRequest('pvc-block-on-dir', undefined, onNode('node-1')), volume_capabilities: block };
    const failure = await createVolume(clients, request).then(
      () => undefined,
      (error: { code: number; details: string }) => error,
    );
    expect(failure?.code).toBe(8); // RESOURCE_EXHAUSTED
    expect(failure?.details).toMatch(/node-1.*cannot serve block.*loop backend/);
    expect(cluster.volumesOnDisk('node-1')).toEqual([]);
  });
});

describe('placement right after the stack starts', () => {
  const cluster = new TestCluster('placefresh');
  afterAll(() => cluster.teardown());

  it('a create without topology right after the first node agent starts places the volume', async () => {
    const clients = cluster.csi((await cluster.startController()).endpoint);
    // startNode returns once the node's record says live (what `durable-csi nodes` shows); visibility, which a
    // create without topology samples, may not list it as live for a few seconds more.
    await cluster.startNode('node-1', { capacity: '2Gi' });
    const answer = await createVolume(clients, createRequest('pvc-right-after-start')).then(
      (response) => ({ ok: response.volume?.volume_id }),
      (error: { code: number; details: string }) => ({ code: error.code, details: error.details }),
    );
    expect(answer).toMatchObject({ ok: expect.stringMatching(/^v1_node-1_/) });
  });
});
