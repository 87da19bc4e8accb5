import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { listNodeRecords, readNodeRecord } from '../../node-records/reads';
import { nodeRecordWorkflowId } from '../../common/names';
import { listPendingOperations } from '../../operations/pending-operations';
import { TestCluster, type ManagedProcess } from '../support/cluster';
import { codeOf, deleteVolume } from '../support/csi-requests';
import { GrpcCallProxy } from '../support/grpc-call-proxy';
import { temporalAddress } from '../support/cluster';
import { ControlPlane } from './control-plane';
import type { KubeRest } from './kube-rest';
import { CONTROL_PLANE_SETS, k8sTools } from './tools';
import { eventually } from '../support/eventually';

/**
 * The Node-deleted policy (kubernetes/node-deleted-watch.ts) against a real kube-apiserver and the real Temporal
 * dev server, the controller a real process. Its Temporal calls pass through a proxy that can hold them, so a
 * Node can return exactly while the policy is still deciding: the race is made, not hoped for.
 */
jest.setTimeout(240_000);

const FORGET_AFTER_S = 3;
const plane = new ControlPlane(k8sTools(CONTROL_PLANE_SETS), fs.mkdtempSync(path.join(os.tmpdir(), 'dcsi-k8s-')), []);
const cluster = new TestCluster('node-deleted');
let proxy: GrpcCallProxy;
let api: KubeRest;
let endpoint = '';
let controller: ManagedProcess | undefined;
const controllerFlags = () => [
  '--kubernetes',
  `--node-deleted=forget-after:${FORGET_AFTER_S}s`,
  '--temporal-address',
  proxy.address,
];

beforeAll(async () => {
  try {
    await plane.start(['namespace-controller']);
  } catch (error) {
    await plane.stop();
    throw error;
  }
  api = plane.rest();
  proxy = await GrpcCallProxy.start(temporalAddress());
  process.env.KUBECONFIG = plane.adminKubeconfig();
  controller = await cluster.startController('controller', controllerFlags());
  endpoint = controller.endpoint;
}, 120_000);

afterAll(async () => {
  await cluster.teardown();
  await proxy?.close();
  api?.close();
  await plane.stop();
  if (!process.env.DURABLE_CSI_KEEP_TEST_DATA) fs.rmSync(plane.root, { recursive: true, force: true });
});

const volumeIdOn = (nodeId: string) => `v1_${nodeId}_0123456789abcdef_${randomBytes(16).toString('hex')}`;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function createNode(nodeId: string): Promise<void> {
  await api.create('/api/v1/nodes', { metadata: { name: nodeId } });
}

/** A PV of this driver on the node: what makes the policy care about a deleted Node. */
async function createPv(volumeId: string): Promise<void> {
  await api.create('/api/v1/persistentvolumes', {
    metadata: { name: `pv-${volumeId.split('_')[3]!.slice(0, 12)}` },
    spec: {
      capacity: { storage: '1Gi' },
      accessModes: ['ReadWriteOnce'],
      persistentVolumeReclaimPolicy: 'Retain',
      csi: { driver: cluster.driverName, volumeHandle: volumeId },
    },
  });
}

async function forgotten(nodeId: string) {
  return (await readNodeRecord(await cluster.temporal(), cluster.driverName, nodeId))?.forgotten;
}

/**
 * A registered node without a Node object, its agent stopped, with a PV: what a controller start finds "deleted".
 * Returns once its record is offline and listed (what the controller's look reads).
 */
async function registeredWithoutNode(nodeId: string): Promise<void> {
  const client = await cluster.temporal();
  await createPv(volumeIdOn(nodeId));
  const agent = await cluster.startNode(nodeId);
  await agent.stop();
  await eventually(
    `${nodeId} offline`,
    async () => (await readNodeRecord(client, cluster.driverName, nodeId))?.node?.live === false,
  );
  await eventually(`the record of ${nodeId} listed`, async () =>
    (await listNodeRecords(client, cluster.driverName)).some((r) => r.nodeId === nodeId),
  );
}

describe('Node-deleted policy (forget-after) on a real API server', () => {
  it('does not forget a Node that returns while the policy is still reading what the node holds', async () => {
    const client = await cluster.temporal();
    const nodeId = 'node-back';
    const volumeId = volumeIdOn(nodeId);
    await createNode(nodeId);
    await createPv(volumeId);
    // A deletion waiting for the node: what a forget would release (and wrongly answer "written off").
    const csi = cluster.csi(endpoint);
    expect(await codeOf(deleteVolume(csi, volumeId))).toBe('ABORTED');
    await eventually(
      `one pending operation on ${nodeId}`,
      async () => (await listPendingOperations(client, cluster.driverName, { nodeId })).length === 1,
    );

    // The policy reads the node's record while the Node is gone; the Node returns before that read answers.
    const release = proxy.hold('DescribeWorkflowExecution', nodeRecordWorkflowId(cluster.driverName, nodeId));
    try {
      await api.delete(`/api/v1/nodes/${nodeId}`);
      await eventually('the policy reading the record', () => proxy.heldCalls() > 0, 30_000);
      await createNode(nodeId);
      await sleep(2000); // the controller's informer sees the Node back (its `add` finds nothing to cancel yet)
    } finally {
      release();
    }
    await sleep((FORGET_AFTER_S + 4) * 1000);
    expect(await forgotten(nodeId)).toBeUndefined();
    expect(await listPendingOperations(client, cluster.driverName, { nodeId })).toHaveLength(1);
    expect(await codeOf(deleteVolume(csi, volumeId))).toBe('ABORTED');
  });

  it('forgets a deleted Node known only by its PVs (no record, nothing pending), so their deletions end', async () => {
    const nodeId = 'node-gone';
    const volumeId = volumeIdOn(nodeId);
    await createNode(nodeId);
    await createPv(volumeId);
    await api.delete(`/api/v1/nodes/${nodeId}`);
    const decision = await eventually('the node forgotten', () => forgotten(nodeId), 30_000);
    expect(decision.reason).toMatch(new RegExp(`Kubernetes Node ${nodeId} deleted at`));
    // The PV's deletion ends with the recorded decision instead of waiting for a node that is gone.
    expect(await codeOf(deleteVolume(cluster.csi(endpoint), volumeId))).toBe('OK');
  });

  it('does not forget a registered node whose Node appears while a restarted controller looks for missing Nodes', async () => {
    const nodeId = 'node-late';
    await registeredWithoutNode(nodeId);

    await controller?.stop();
    const release = proxy.hold('DescribeWorkflowExecution', nodeRecordWorkflowId(cluster.driverName, nodeId));
    // The restarted controller serves CSI once its look for missing Nodes is done: it waits for the release.
    const restarted = cluster.startController('controller-2', controllerFlags());
    try {
      await eventually('the restarted controller reading the record', () => proxy.heldCalls() > 0, 60_000);
      await createNode(nodeId);
      await sleep(2000); // its informer sees the Node (nothing to cancel yet)
    } finally {
      release();
    }
    controller = await restarted;
    endpoint = controller.endpoint;
    await sleep((FORGET_AFTER_S + 4) * 1000);
    expect(await forgotten(nodeId)).toBeUndefined();
  });

  it("looks for missing Nodes again when a controller start's first look fails, and forgets one it then finds", async () => {
    const nodeId = 'node-unlisted';
    await registeredWithoutNode(nodeId);

    await controller?.stop();
    // The restarted controller's listing of node records is refused: its first look for missing Nodes fails.
    const lift = proxy.refuse('ListWorkflowExecutions', 'nodePresence');
    const restarted = cluster.startController('controller-3', controllerFlags());
    try {
      await eventually('the listing of node records refused', () => proxy.refusedCalls() > 0, 60_000);
    } finally {
      lift();
    }
    controller = await restarted;
    endpoint = controller.endpoint;
    // Looked for again (every 10 s): found deleted, and forgotten FORGET_AFTER_S later.
    await eventually(`${nodeId} forgotten`, async () => (await forgotten(nodeId)) !== undefined, 60_000);
  });
});
