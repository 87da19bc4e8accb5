import type { ServiceError } from '@grpc/grpc-js';
import { status } from '@grpc/grpc-js';
import { deleteWorkflowId, parseVolumeId } from '../../common/names';
import { TestCluster, type ManagedProcess } from '../support/cluster';
import { codeOf, createRequest, createVolume, deleteVolume, onNode, retryLikeCo } from '../support/csi-requests';

/**
 * external-provisioner deletes a volume when saving its PV fails after a successful create, then retries the same
 * name. When the volume's node is down, that deletion waits; a re-create answered with the same volume would give
 * the CO a PV for a volume its own deletion removes as soon as the node returns (issue 17, item 1).
 */
describe('CreateVolume of a name whose deletion waits for its node', () => {
  const cluster = new TestCluster('create-during-delete');
  let clients: ReturnType<TestCluster['csi']>;
  let node2: ManagedProcess;

  beforeAll(async () => {
    [, node2] = await Promise.all([cluster.startNode('node-1'), cluster.startNode('node-2')]);
    clients = cluster.csi((await cluster.startController()).endpoint);
  });
  afterAll(() => cluster.teardown());

  it('answers ABORTED naming the deletion until it ends, then makes a new volume', async () => {
    const request = createRequest('pvc-saved-late', undefined, onNode('node-2'));
    const first = (await retryLikeCo(() => createVolume(clients, request))).volume!.volume_id;
    await node2.stop();
    expect(await codeOf(deleteVolume(clients, first, 5000))).toBe('ABORTED');

    const refused = await failureOf(createVolume(clients, request, 8000));
    expect(status[refused.code]).toBe('ABORTED');
    expect(refused.details).toContain(deleteWorkflowId(cluster.driverName, first));
    expect(refused.details).toMatch(/deletion of \S+ has waited \d+s for node node-2/);
    expect(cluster.volumesOnDisk('node-2')).toEqual([parseVolumeId(first)!.key]);

    // The CO keeps retrying both; the create answers once the deletion has ended, with a volume of its own.
    const recreated = retryLikeCo(() => createVolume(clients, request));
    await new Promise((resolve) => setTimeout(resolve, 2000));
    node2 = await cluster.startNode('node-2');
    await retryLikeCo(() => deleteVolume(clients, first));
    const second = (await recreated).volume!.volume_id;
    expect(second).not.toBe(first);
    expect(parseVolumeId(second)!.nodeId).toBe('node-2');
    expect(cluster.volumesOnDisk('node-2')).toEqual([parseVolumeId(second)!.key]);
  });
});

async function failureOf(call: Promise<unknown>): Promise<ServiceError> {
  try {
    await call;
  } catch (error) {
    return error as ServiceError;
  }
  throw new Error('the call succeeded; expected it to fail');
}
