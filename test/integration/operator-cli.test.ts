import { execFile } from 'node:child_process';
import fs from 'node:fs';
import { listNodeViews } from '../../node-records/reads';
import { CLI_MAIN } from '../../agent/spawn-cli';
import { TestCluster } from '../support/cluster';
import { testTemporalFlags } from '../support/test-temporal';
import { codeOf, createRequest, createVolume, deleteVolume, onNode, retryLikeCo } from '../support/csi-requests';
import { eventually } from '../support/eventually';

interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

interface StuckJson {
  operations: {
    workflowId: string;
    operation: string;
    volumeId: string | null;
    nodeId: string | null;
    phase: string | null;
    ageSeconds: number;
    waitingSince: string | null;
  }[];
}

interface NodesJson {
  nodes: { nodeId: string; live: boolean; pending: number; volumeCount: number }[];
  forgotten: { nodeId: string; reason: string }[];
}

interface ClaimJson {
  pvc: { namespace: string; name: string };
  volumes: { volumeId: string; operations: { type: string }[] }[];
  unplaced: unknown[];
}

interface DescribeJson {
  operations: {
    workflowId: string;
    type: string;
    status: string;
    result: Record<string, unknown> | null;
    timeline: { event: string; detail: string; nodeId?: string; signal?: string }[];
  }[];
}

/**
 * The operator CLI against real processes: a node dies with deletions waiting for it, an operator finds them
 * with `volumes stuck` and `nodes`, forgets the node, and reads what happened with `volumes describe`.
 */
describe('operator CLI: stuck operations, nodes, forget, describe', () => {
  const cluster = new TestCluster('operator');
  afterAll(() => cluster.teardown());

  const cli = (...args: string[]) => run([...args, '--driver-name', cluster.driverName, ...testTemporalFlags()]);
  const json = async <T>(...args: string[]): Promise<T> => {
    const result = await cli(...args, '--output', 'json');
    if (result.code !== 0) throw new Error(`${args.join(' ')} exited ${result.code}: ${result.stderr}`);
    return JSON.parse(result.stdout) as T;
  };

  it('lists deletions waiting for a dead node, refuses careless forgets, and releases them on a forget', async () => {
    const [, doomed, idle] = await Promise.all(['node-1', 'node-2', 'node-3'].map((id) => cluster.startNode(id)));
    const csi = cluster.csi((await cluster.startController()).endpoint);
    // As external-provisioner's --extra-create-metadata passes them.
    const claim = {
      'csi.storage.k8s.io/pvc/namespace': 'team-a',
      'csi.storage.k8s.io/pvc/name': 'data-db-0',
      'csi.storage.k8s.io/pv/name': 'pvc-kept',
    };
    const kept = await retryLikeCo(() =>
      createVolume(csi, createRequest('pvc-kept', undefined, { ...onNode('node-1'), parameters: claim })),
    );
    const keptId = kept.volume!.volume_id;
    const lost: string[] = [];
    for (const name of ['pvc-lost-1', 'pvc-lost-2']) {
      const answer = await retryLikeCo(() => createVolume(csi, createRequest(name, undefined, onNode('node-2'))));
      lost.push(answer.volume!.volume_id);
    }
    const deleteIds = lost.map((volumeId) => `${cluster.driverName}/delete/${volumeId}`).sort();

    // Deletions issued once the registry judges node-2 offline record the phase waiting-for-node.
    await Promise.all([doomed!.kill('SIGKILL'), idle!.kill('SIGKILL')]);
    const client = await cluster.temporal();
    await eventually(
      'two nodes offline',
      async () => {
        const views = await listNodeViews(client, cluster.driverName);
        return views.filter((view) => !view.live).length === 2;
      },
      90_000,
    );
    for (const volumeId of lost) expect(await codeOf(deleteVolume(csi, volumeId, 4000))).toBe('ABORTED');

    const stuck = await eventually('two stuck operations with their phase', async () => {
      const listed = await json<StuckJson>('volumes', 'stuck');
      return listed.operations.length === 2 && listed.operations.every((op) => op.phase) ? listed : undefined;
    });
    expect(stuck.operations.map((op) => op.workflowId).sort()).toEqual(deleteIds);
    for (const operation of stuck.operations) {
      expect(operation).toMatchObject({ operation: 'delete', nodeId: 'node-2', phase: 'waiting-for-node' });
      expect(lost).toContain(operation.volumeId);
      expect(operation.ageSeconds).toBeGreaterThanOrEqual(0);
      expect(operation.ageSeconds).toBeLessThan(300);
      expect(operation.waitingSince).not.toBeNull();
    }
    const table = await cli('volumes', 'stuck');
    expect(table.stdout).toMatch(/^OPERATION +VOLUME +NODE +PHASE +AGE +WAITING +WORKFLOW ID\n/);
    expect(table.stdout).toContain('waiting-for-node');
    expect((await json<StuckJson>('volumes', 'stuck', '--node', 'node-1')).operations).toEqual([]);
    expect((await json<StuckJson>('volumes', 'stuck', '--older-than', '1h')).operations).toEqual([]);
    expect((await json<StuckJson>('volumes', 'stuck', '--older-than', '1s')).operations).toHaveLength(2);
    const badNode = await cli('volumes', 'stuck', '--node', 'node_2" OR "x');
    expect(badNode).toMatchObject({ code: 1, stdout: '' });
    expect(badNode.stderr).toMatch(/^durable-csi: .* is not a node ID\n$/);

    const nodes = await json<NodesJson>('nodes');
    expect(nodes.nodes).toEqual([
      expect.objectContaining({ nodeId: 'node-1', live: true, pending: 0 }),
      expect.objectContaining({ nodeId: 'node-2', live: false, pending: 2 }),
      expect.objectContaining({ nodeId: 'node-3', live: false, pending: 0 }),
    ]);
    expect(nodes.forgotten).toEqual([]);
    expect((await cli('nodes')).stdout).toMatch(
      /^NODE +LIVE +LAST HEARTBEAT +CAPACITY +AVAILABLE +VOLUMES +AS OF +PENDING/,
    );

    const waiting = await cli('volumes', 'describe', lost[0]!);
    expect(waiting.stdout).toContain('node-2: offline');
    expect(waiting.stdout).toContain('pending: deleteVolumeOnNode scheduled, attempt 1');

    const live = await cli('nodes', 'forget', 'node-1', '--reason', 'x');
    expect(live.code).toBe(1);
    expect(live.stderr).toMatch(/node node-1 is live/);
    const noReason = await cli('nodes', 'forget', 'node-2');
    expect(noReason.code).toBe(1);
    expect(noReason.stderr).toMatch(/--reason/);
    const blankReason = await cli('nodes', 'forget', 'node-2', '--reason', '  ');
    expect(blankReason.code).toBe(1);
    expect(blankReason.stderr).toMatch(/a reason is required/);

    const forgot = await json<{ nodeId: string; reason: string; released: string[] }>(
      'nodes',
      'forget',
      'node-2',
      '--reason',
      'disk died',
    );
    expect(forgot).toMatchObject({ nodeId: 'node-2', reason: 'disk died' });
    expect([...forgot.released].sort()).toEqual(deleteIds);
    const nothingPending = await cli('nodes', 'forget', 'node-3', '--reason', 'decommissioned');
    expect(nothingPending).toMatchObject({
      code: 0,
      stdout: 'forgot node node-3 (decommissioned); released 0 pending operations\n',
    });

    await eventually(
      'no stuck operation left',
      async () => (await json<StuckJson>('volumes', 'stuck')).operations.length === 0,
    );
    for (const volumeId of lost) expect(await codeOf(retryLikeCo(() => deleteVolume(csi, volumeId)))).toBe('OK');
    // The registry applies the forget in its next workflow task: poll rather than race it.
    const after = await eventually('two nodes forgotten', async () => {
      const listed = await json<NodesJson>('nodes');
      return listed.forgotten.length === 2 ? listed : undefined;
    });
    expect(after.nodes.map((node) => node.nodeId)).toEqual(['node-1']);
    expect(after.forgotten).toEqual([
      expect.objectContaining({ nodeId: 'node-2', reason: 'disk died' }),
      expect.objectContaining({ nodeId: 'node-3', reason: 'decommissioned' }),
    ]);
    expect((await cli('nodes')).stdout).toMatch(
      /\n\nFORGOTTEN +REASON +FORGOTTEN AT +LAST HEARTBEAT\nnode-2 +disk died /,
    );

    const described = await eventually('both operations closed', async () => {
      const description = await json<DescribeJson>('volumes', 'describe', lost[0]!);
      const closed = description.operations.filter((op) => op.status === 'COMPLETED');
      return closed.length === 2 ? description : undefined;
    });
    const [create, deletion] = described.operations;
    expect(create).toMatchObject({ type: 'createVolume', result: { volumeId: lost[0], nodeId: 'node-2' } });
    expect(deletion).toMatchObject({
      type: 'deleteVolume',
      workflowId: `${cluster.driverName}/delete/${lost[0]}`,
      result: { outcome: 'node-forgotten', reason: 'disk died' },
    });
    const events = deletion!.timeline.map((entry) => entry.event);
    expect(events[0]).toBe('workflow-started');
    expect(events.at(-1)).toBe('workflow-completed');
    expect(deletion!.timeline).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ event: 'activity-scheduled', nodeId: 'node-2' }),
        expect.objectContaining({ event: 'signal', signal: 'nodeForgotten' }),
        expect.objectContaining({ event: 'workflow-completed', detail: 'outcome node-forgotten (disk died)' }),
      ]),
    );
    const human = await cli('volumes', 'describe', lost[0]!);
    expect(human.stdout).toContain('node-2: forgotten (disk died)');
    expect(human.stdout).toContain('nodeForgotten: node node-2 declared gone (disk died)');

    // A claim's operations by the names an operator knows: its create, and the deletion found through the volume.
    expect(await codeOf(retryLikeCo(() => deleteVolume(csi, keptId)))).toBe('OK');
    const byClaim = await eventually('the claim found with its create and deletion', async () => {
      const found = await json<ClaimJson>('volumes', 'describe', '--pvc', 'team-a/data-db-0');
      return found.volumes[0]?.operations.length === 2 ? found : undefined;
    });
    expect(byClaim.pvc).toEqual({ namespace: 'team-a', name: 'data-db-0' });
    expect(byClaim.volumes.map((volume) => volume.volumeId)).toEqual([keptId]);
    expect(byClaim.volumes[0]!.operations.map((op) => op.type)).toEqual(['createVolume', 'deleteVolume']);
    expect(byClaim.unplaced).toEqual([]);
    const claimText = await cli('volumes', 'describe', '--pvc', 'team-a/data-db-0');
    expect(claimText.stdout).toMatch(/^pvc {5}team-a\/data-db-0\n\nvolume {2}v1_node-1_/);
    expect(claimText.stdout).toContain('create pvc-kept (67108864 bytes) for PVC team-a/data-db-0');
    expect((await json<ClaimJson>('volumes', 'describe', '--pvc', 'team-a/other')).volumes).toEqual([]);
    for (const [bad, said] of [
      ['data-db-0', /--pvc takes NAMESPACE\/NAME, not "data-db-0"/],
      ['Team_A/x', /"Team_A" is not a Kubernetes namespace name/],
      ['team-a/x" OR "y', /is not a PersistentVolumeClaim name/],
    ] as const) {
      const refused = await cli('volumes', 'describe', '--pvc', bad);
      expect(refused).toMatchObject({ code: 1, stdout: '' });
      expect(refused.stderr).toMatch(said);
    }
    const both = await cli('volumes', 'describe', keptId, '--pvc', 'team-a/data-db-0');
    expect(both.code).toBe(1);
    expect(both.stderr).toMatch(/a volume ID or --pvc NAMESPACE\/NAME, one of them/);

    // The logs an operator greps: the controller's call lines name the claim and the volume; the node logs the
    // deletion as it logs the allocation.
    const controllerLog = fs.readFileSync(cluster.log('controller'), 'utf8');
    expect(controllerLog).toMatch(/"method":"CreateVolume".*"pv":"pvc-kept","pvc":"team-a\/data-db-0".*"ok"/);
    expect(controllerLog).toMatch(new RegExp(`"method":"DeleteVolume","volume_id":"${keptId}".*"ok"`));
    const nodeLog = fs.readFileSync(cluster.log('node-1'), 'utf8');
    expect(nodeLog).toContain('volume allocated');
    expect(nodeLog).toMatch(/volume deleted/);
  }, 300_000);
});

function run(args: string[]): Promise<CliResult> {
  return new Promise((resolve) => {
    execFile(process.execPath, [CLI_MAIN, ...args], { timeout: 60_000 }, (error, stdout, stderr) => {
      const code = error ? (typeof error.code === 'number' ? error.code : -1) : 0;
      resolve({ code, stdout, stderr });
    });
  });
}
