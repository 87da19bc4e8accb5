import { call, withDeadline } from '../../csi/client';
import type { GetCapacityResponse__Output } from '../../csi/generated/csi/v1/GetCapacityResponse';
import type { NodeGetInfoResponse__Output } from '../../csi/generated/csi/v1/NodeGetInfoResponse';
import type { ProbeResponse__Output } from '../../csi/generated/csi/v1/ProbeResponse';
import type { ListVolumesResponse__Output } from '../../csi/generated/csi/v1/ListVolumesResponse';
import { TOPOLOGY_NODE_KEY } from '../../common/names';
import { TestCluster } from '../support/cluster';
import { GiB, MiB, codeOf, createRequest, createVolume, onNode, retryLikeCo } from '../support/csi-requests';

describe('identity, ListVolumes and GetCapacity over the real stack', () => {
  const cluster = new TestCluster('rpcs');
  let clients: ReturnType<TestCluster['csi']>;
  let node2: Awaited<ReturnType<TestCluster['startNode']>>;

  beforeAll(async () => {
    await cluster.startNode('node-1', { capacity: '4Gi' });
    node2 = await cluster.startNode('node-2', { capacity: '2Gi' });
    clients = cluster.csi((await cluster.startController()).endpoint);
  });
  afterAll(() => cluster.teardown());

  it('identifies the driver and its capabilities', async () => {
    const info = await call<{ name: string }>((done) => clients.identity.GetPluginInfo({}, withDeadline(), done));
    expect(info.name).toBe(cluster.driverName);
    const probe = await call<ProbeResponse__Output>((done) => clients.identity.Probe({}, withDeadline(), done));
    expect(probe.ready?.value).toBe(true);
    const node = cluster.csi(node2.endpoint);
    const nodeInfo = await call<NodeGetInfoResponse__Output>((done) => node.node.NodeGetInfo({}, withDeadline(), done));
    expect(nodeInfo.node_id).toBe('node-2');
    expect(nodeInfo.accessible_topology?.segments).toEqual({ [TOPOLOGY_NODE_KEY]: 'node-2' });
  });

  it('lists every volume across nodes, page by page', async () => {
    const created = new Set<string>();
    for (let index = 0; index < 5; index++) {
      const nodeId = index % 2 ? 'node-2' : 'node-1';
      const answer = await retryLikeCo(() =>
        createVolume(clients, createRequest(`pvc-list-${index}`, 64 * MiB, onNode(nodeId))),
      );
      created.add(answer.volume!.volume_id);
    }
    const seen: string[] = [];
    let token = '';
    let pages = 0;
    do {
      const page = await call<ListVolumesResponse__Output>((done) =>
        clients.controller.ListVolumes({ max_entries: 2, starting_token: token }, withDeadline(), done),
      );
      expect(page.entries.length).toBeLessThanOrEqual(2);
      seen.push(...page.entries.map((entry) => entry.volume!.volume_id));
      token = page.next_token;
      pages++;
    } while (token);
    expect(pages).toBe(3);
    expect(new Set(seen)).toEqual(created);
    const bad = call((done) => clients.controller.ListVolumes({ starting_token: 'garbage' }, withDeadline(), done));
    expect(await codeOf(bad)).toBe('ABORTED');
  });

  it('reports capacity per node from the registry, and zero for a node that is down', async () => {
    const capacityOf = async (nodeId?: string) => {
      const topology = nodeId ? { segments: { [TOPOLOGY_NODE_KEY]: nodeId } } : undefined;
      const answer = await call<GetCapacityResponse__Output>((done) =>
        clients.controller.GetCapacity({ accessible_topology: topology }, withDeadline(), done),
      );
      return Number(answer.available_capacity);
    };
    // node-1: 4Gi minus 3 x 64Mi; heartbeats report usage within 10 s.
    await expectEventually(async () => expect(await capacityOf('node-1')).toBe(4 * GiB - 3 * 64 * MiB));
    expect(await capacityOf('node-unknown')).toBe(0);
    await node2.kill('SIGKILL');
    // Considered down three heartbeats after its last one.
    await expectEventually(async () => expect(await capacityOf('node-2')).toBe(0), 45_000);
    expect(await capacityOf()).toBe(4 * GiB - 3 * 64 * MiB);
  });
});

async function expectEventually(check: () => Promise<void>, timeoutMs = 20_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await check();
    } catch (error) {
      if (Date.now() > until) throw error;
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
  }
}
