import { randomBytes } from 'node:crypto';
import { TestCluster, type ManagedProcess } from '../support/cluster';
import { runCli } from '../support/run-cli';

/**
 * `durable-csi volumes` tells the truth: CSI answers DeleteVolume with success for volumes that do not exist,
 * so the CLI says whether something was deleted, and if not, why; the exit code stays 0 either way. A create
 * without a size says that the default size was used.
 */
describe('durable-csi volumes: truthful answers', () => {
  const cluster = new TestCluster('volumes-cli');
  afterAll(() => cluster.teardown());
  let endpoint = '';
  const volumes = (...args: string[]) => runCli(['volumes', '--endpoint', endpoint, ...args]);
  const madeUpKey = () => randomBytes(16).toString('hex');

  beforeAll(async () => {
    await cluster.startNode('node-1');
    endpoint = (await cluster.startController()).endpoint;
  });

  it('says the default size was used for --size 0', async () => {
    const created = await volumes('create', 'no-size', '--size', '0');
    expect(created.code).toBe(0);
    expect(created.stdout).toMatch(/^v1_node-1_\S+\t1Gi\tnode-1\n$/);
    expect(created.stderr).toContain("--size 0 requests no particular size: the driver's default size, 1Gi, was used");

    const sized = await volumes('create', 'sized', '--size', '2Gi');
    expect(sized.stderr).not.toContain('default size');
  });

  it('says "deleted" only for a deletion, and what it found otherwise, exiting 0 when the answer is final', async () => {
    const created = await volumes('create', 'to-delete', '--node', 'node-1');
    expect(created.code).toBe(0);
    const volumeId = created.stdout.split('\t')[0]!;
    const [, nodeId, poolPrefix] = volumeId.split('_');
    expect(cluster.volumesOnDisk('node-1')).toContain(volumeId.split('_')[3]);

    const deleted = await volumes('delete', volumeId);
    expect(deleted).toMatchObject({ code: 0, stdout: `deleted ${volumeId}\n` });
    expect(cluster.volumesOnDisk('node-1')).not.toContain(volumeId.split('_')[3]);

    const cases: [string, string][] = [
      ['not-a-volume', 'nothing to delete: "not-a-volume" is not a volume ID this driver issues'],
      [`v1_${nodeId}_${poolPrefix}_${madeUpKey()}`, `nothing to delete: node node-1 has no volume`],
      [`v1_${nodeId}_0123456789abcdef_${madeUpKey()}`, 'was issued on an earlier pool of node node-1'],
    ];
    for (const [id, expected] of cases) {
      const answer = await volumes('delete', id);
      expect({ id, code: answer.code, stdout: answer.stdout }).toEqual({
        id,
        code: 0,
        stdout: expect.stringContaining(expected),
      });
      expect(answer.stdout).not.toMatch(/^deleted/);
    }
    // A node nobody knows is no proof of anything: the deletion waits for it (ABORTED, exit 1) and says how to end it.
    const unknown = await volumes('delete', `v1_node-9_${poolPrefix}_${madeUpKey()}`);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('ABORTED');
    expect(unknown.stderr).toContain('durable-csi nodes forget node-9 --reason');
  });
});

/**
 * ListVolumes asks every registered node's pool; a node that does not answer is not asked again, and its volumes
 * are missing from the answer. `volumes list` says which nodes those are (stderr for the table, a field in json).
 */
describe('durable-csi volumes list: names the nodes that did not answer', () => {
  const cluster = new TestCluster('volumes-list');
  afterAll(() => cluster.teardown());
  let endpoint = '';
  let nodeTwo: ManagedProcess | undefined;
  const volumes = (...args: string[]) => runCli(['volumes', '--endpoint', endpoint, ...args]);

  beforeAll(async () => {
    await cluster.startNode('node-1');
    nodeTwo = await cluster.startNode('node-2');
    endpoint = (await cluster.startController()).endpoint;
  });

  it('lists every node in the table and json, then names the node that is down on stderr and in json', async () => {
    const [one, two] = [
      await volumes('create', 'on-one', '--node', 'node-1'),
      await volumes('create', 'on-two', '--node', 'node-2'),
    ];
    const [oneId, twoId] = [one.stdout.split('\t')[0]!, two.stdout.split('\t')[0]!];

    const all = await volumes('list');
    expect(all).toMatchObject({ code: 0, stderr: '' });
    expect(all.stdout.split('\n')[0]).toMatch(/^VOLUME ID\s+SIZE\s+NODE$/);
    expect(all.stdout).toContain(oneId);
    expect(all.stdout).toContain(twoId);
    const allJson = await volumes('list', '--output', 'json');
    expect(allJson.code).toBe(0);
    expect(JSON.parse(allJson.stdout)).toEqual({
      volumes: expect.arrayContaining([
        { volumeId: oneId, capacityBytes: 1024 ** 3, nodeId: 'node-1' },
        { volumeId: twoId, capacityBytes: 1024 ** 3, nodeId: 'node-2' },
      ]),
      unansweredNodes: [],
    });

    await nodeTwo?.stop();
    const partial = await volumes('list');
    expect(partial.code).toBe(0);
    expect(partial.stdout).toContain(oneId);
    expect(partial.stdout).not.toContain(twoId);
    expect(partial.stderr).toContain('node-2 did not answer');
    expect(partial.stderr).not.toContain('node-1');
    const partialJson = await volumes('list', '--output', 'json');
    expect(partialJson.code).toBe(0);
    const listed = JSON.parse(partialJson.stdout) as { volumes: { volumeId: string }[]; unansweredNodes: string[] };
    expect(listed.unansweredNodes).toEqual(['node-2']);
    expect(listed.volumes.map((volume) => volume.volumeId)).toContain(oneId);
    expect(listed.volumes.map((volume) => volume.volumeId)).not.toContain(twoId);
  });
});
