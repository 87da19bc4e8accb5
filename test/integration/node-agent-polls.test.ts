import { NODE_ACTIVITY_POLLS } from '../../agent/worker-options';
import { nodeTaskQueue } from '../../common/names';
import { TestCluster, temporalAddress } from '../support/cluster';
import { GrpcCallProxy } from '../support/grpc-call-proxy';

/**
 * What a node agent holds open on the frontend at rest, counted on the wire. Every node's idle polls count
 * against the per-namespace limit on concurrent polls (1,200 by default): at ten a node (the SDK's default, which
 * an ignored option had left in place) a hundred-odd nodes reach it, and refused polls leave tasks waiting.
 */
describe('a node agent at rest', () => {
  const cluster = new TestCluster('polls');
  let proxy: GrpcCallProxy;

  beforeAll(async () => {
    proxy = await GrpcCallProxy.start(temporalAddress());
  });
  afterAll(async () => {
    await cluster.teardown();
    await proxy.close();
  });

  it('holds one long poll on its task queue', async () => {
    await cluster.startNode('node-p', { temporalAddress: proxy.address });
    const queue = nodeTaskQueue(cluster.driverName, 'node-p');
    const open = () => proxy.openCalls('PollActivityTaskQueue', queue).length;
    // The worker starts all its pollers at once; give them time to arrive, and a poll time to be renewed.
    const until = Date.now() + 3_000;
    let most = 0;
    while (Date.now() < until) {
      most = Math.max(most, open());
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(most).toBe(NODE_ACTIVITY_POLLS.atRest);
    expect(open()).toBe(NODE_ACTIVITY_POLLS.atRest);
  });
});
