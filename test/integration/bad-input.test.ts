import type { Client } from '@temporalio/client';
import { WorkflowNotFoundError } from '@temporalio/client';
import { createWorkflowId } from '../../common/names';
import { TestCluster } from '../support/cluster';
import { GiB, codeOf, createRequest, createVolume, onNode } from '../support/csi-requests';

/** Bad requests get the brief's codes, and nothing is started or written anywhere. */
describe('CreateVolume with bad input', () => {
  const cluster = new TestCluster('badinput');
  let clients: ReturnType<TestCluster['csi']>;
  let temporal: Client;

  beforeAll(async () => {
    await cluster.startNode('node-1', { capacity: '2Gi' });
    await cluster.startNode('node-2', { capacity: '2Gi' });
    clients = cluster.csi((await cluster.startController('controller', ['--max-volume-size', '1Ti'])).endpoint);
    temporal = await cluster.temporal();
  });
  afterAll(() => cluster.teardown());

  const mount = [{ mount: {}, access_mode: { mode: 'SINGLE_NODE_WRITER' as const } }];
  const cases: [string, string, Record<string, unknown>][] = [
    ['missing name', 'INVALID_ARGUMENT', { ...createRequest(''), name: '' }],
    ['missing capabilities', 'INVALID_ARGUMENT', { ...createRequest('bad-caps'), volume_capabilities: [] }],
    [
      'capability without access type',
      'INVALID_ARGUMENT',
      {
        ...createRequest('bad-type'),
        volume_capabilities: [{ access_mode: { mode: 'SINGLE_NODE_WRITER' } }],
      },
    ],
    [
      'multi-node access mode',
      'INVALID_ARGUMENT',
      {
        ...createRequest('bad-mode'),
        volume_capabilities: [{ mount: {}, access_mode: { mode: 'MULTI_NODE_MULTI_WRITER' } }],
      },
    ],
    [
      'negative capacity',
      'INVALID_ARGUMENT',
      { ...createRequest('bad-neg'), capacity_range: { required_bytes: '-1' } },
    ],
    [
      'capacity above the largest volume',
      'OUT_OF_RANGE',
      {
        ...createRequest('bad-huge'),
        capacity_range: { required_bytes: String(2 * 1024 * GiB) },
      },
    ],
    [
      'limit below required',
      'INVALID_ARGUMENT',
      {
        ...createRequest('bad-limit'),
        capacity_range: { required_bytes: String(GiB), limit_bytes: String(GiB / 2) },
      },
    ],
    ['unknown parameter', 'INVALID_ARGUMENT', { ...createRequest('bad-param'), parameters: { colour: 'blue' } }],
    [
      'block access on dir nodes',
      'INVALID_ARGUMENT',
      {
        ...createRequest('bad-block'),
        volume_capabilities: [{ block: {}, access_mode: { mode: 'SINGLE_NODE_WRITER' } }],
      },
    ],
    [
      // No record: the node's agent may not have registered yet, or its record was lost. Retriable, never final.
      'requisite topology naming a node with no record',
      'UNAVAILABLE',
      {
        ...createRequest('bad-node', undefined, onNode('node-unknown')),
      },
    ],
    [
      'unknown topology key',
      'INVALID_ARGUMENT',
      {
        ...createRequest('bad-key'),
        accessibility_requirements: { requisite: [{ segments: { 'kubernetes.io/hostname': 'node-1' } }] },
      },
    ],
    ['name with ..', 'INVALID_ARGUMENT', createRequest('..')],
    ['name with /', 'INVALID_ARGUMENT', createRequest('a/../../etc')],
    ['name with NUL', 'INVALID_ARGUMENT', createRequest('pvc-\u0000-x')],
    [
      'content source',
      'INVALID_ARGUMENT',
      {
        ...createRequest('bad-source'),
        volume_content_source: { snapshot: { snapshot_id: 'snap-1' } },
      },
    ],
    [
      'mount and block together',
      'INVALID_ARGUMENT',
      {
        ...createRequest('bad-mix'),
        volume_capabilities: [...mount, { block: {}, access_mode: { mode: 'SINGLE_NODE_WRITER' } }],
      },
    ],
  ];

  it.each(cases)('%s: %s, nothing on disk', async (_label, code, request) => {
    expect(await codeOf(createVolume(clients, request))).toBe(code);
    expect(cluster.volumesOnDisk('node-1')).toEqual([]);
    expect(cluster.volumesOnDisk('node-2')).toEqual([]);
    const name = String(request.name);
    // Block and topology need node records, so the workflow refuses them; everything else the handler refuses.
    const refusedInHandler = !['bad-block', 'bad-node'].includes(name);
    if (refusedInHandler && /^[a-z-]+$/.test(name)) {
      // No workflow was started for it either.
      await expect(temporal.workflow.getHandle(createWorkflowId(cluster.driverName, name)).describe()).rejects.toThrow(
        WorkflowNotFoundError,
      );
    }
  });

  it('the same name with a different size is ALREADY_EXISTS, and leaves the first volume alone', async () => {
    const first = await createVolume(clients, createRequest('pvc-size', 64 * 1024 * 1024));
    expect(await codeOf(createVolume(clients, createRequest('pvc-size', 128 * 1024 * 1024)))).toBe('ALREADY_EXISTS');
    const onDisk = [...cluster.volumesOnDisk('node-1'), ...cluster.volumesOnDisk('node-2')];
    expect(onDisk).toEqual([first.volume!.volume_id.split('_')[3]]);
  });

  it('no node with room: RESOURCE_EXHAUSTED, nothing allocated', async () => {
    const before = [...cluster.volumesOnDisk('node-1'), ...cluster.volumesOnDisk('node-2')];
    expect(await codeOf(createVolume(clients, createRequest('pvc-too-big', 3 * GiB)))).toBe('RESOURCE_EXHAUSTED');
    expect(await codeOf(createVolume(clients, createRequest('pvc-full-node', 3 * GiB, onNode('node-2'))))).toBe(
      'RESOURCE_EXHAUSTED',
    );
    expect([...cluster.volumesOnDisk('node-1'), ...cluster.volumesOnDisk('node-2')]).toEqual(before);
  });
});
