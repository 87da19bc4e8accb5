import { TestCluster } from '../support/cluster';
import { codeOf, createRequest, createVolume, retryLikeCo } from '../support/csi-requests';

/** Invariant 5: the controller killed in the middle of a create; the CO's retry reaches a new one. */
describe('controller killed with SIGKILL mid-create', () => {
  const cluster = new TestCluster('ctlkill');
  afterAll(() => cluster.teardown());

  it('the retry through a fresh controller yields exactly one volume', async () => {
    // The node has just died (its record still shows it live) when the create starts, so the workflow is certainly
    // in flight, its first try waiting for the node, when the kill lands.
    const node = await cluster.startNode('node-1');
    await node.kill('SIGKILL');
    const first = await cluster.startController('first');
    const request = createRequest('pvc-crash-mid-create');
    const inFlight = codeOf(createVolume(cluster.csi(first.endpoint), request, 10_000));
    await new Promise((resolve) => setTimeout(resolve, 1000));
    await first.kill('SIGKILL');
    expect(await inFlight).toBe('UNAVAILABLE');

    await cluster.startNode('node-1');
    const second = cluster.csi((await cluster.startController('second')).endpoint);
    const answer = await retryLikeCo(() => createVolume(second, request));
    expect(cluster.volumesOnDisk('node-1')).toEqual([answer.volume!.volume_id.split('_')[3]]);
  });

  it('a kill at a random moment of many creates leaves exactly one volume per name', async () => {
    const first = await cluster.startController('random-first');
    const names = Array.from({ length: 8 }, (_, index) => `pvc-random-${index}`);
    const clients = cluster.csi(first.endpoint);
    const calls = names.map((name) => codeOf(createVolume(clients, createRequest(name), 10_000)));
    await new Promise((resolve) => setTimeout(resolve, 50 + Math.floor(Math.random() * 300)));
    await first.kill('SIGKILL');
    await Promise.all(calls);

    const second = cluster.csi((await cluster.startController('random-second')).endpoint);
    const answers = await Promise.all(
      names.map((name) => retryLikeCo(() => createVolume(second, createRequest(name)))),
    );
    const keys = answers.map((answer) => answer.volume!.volume_id.split('_')[3]);
    expect(new Set(keys).size).toBe(names.length);
    // Plus the first test's volume: nothing else on disk.
    expect(cluster.volumesOnDisk('node-1')).toHaveLength(names.length + 1);
    for (const key of keys) expect(cluster.volumesOnDisk('node-1')).toContain(key);
  });
});
