import fs from 'node:fs';
import path from 'node:path';
import { spawnCli } from '../../agent/spawn-cli';
import { locateTemporalCli, temporalCliVersion } from '../../temporal-dev/locate-cli';
import { pinnedServerVersion } from '../temporal-prod/installed-server';
import { createNamespace, runAsPrinted } from '../temporal-prod/namespace-setup';
import { temporalConfigFlags } from '../temporal-prod/prod-temporal';
import { TestCluster } from '../support/cluster';
import { createRequest, createVolume, deleteVolume, retryLikeCo } from '../support/csi-requests';
import { CONFIG_ENV, connectTestTemporal, testTemporalConfig } from '../support/test-temporal';

/**
 * On a real cluster nothing exists until an operator creates it. This follows docs/operations.md on the
 * production-style server: a new namespace, a controller that refuses to start without the search attributes and
 * prints the commands, those very commands run, then a controller that starts and provisions.
 */
describe('setting up a namespace the way an operator does', () => {
  const shared = testTemporalConfig();
  const namespace = `ops-${Date.now().toString(36)}`;
  const cluster = new TestCluster('ops-setup');

  afterAll(async () => {
    await cluster.teardown();
    process.env[CONFIG_ENV] = JSON.stringify(shared);
  });

  it('runs the same Temporal server version as the dev server inside the pinned CLI', async () => {
    const pinned = pinnedServerVersion().replace(/^v/, '');
    expect(await temporalCliVersion(await locateTemporalCli())).toContain(`(Server ${pinned},`);
    const connection = await connectTestTemporal();
    try {
      expect((await connection.workflowService.getSystemInfo({})).serverVersion).toBe(pinned);
    } finally {
      await connection.close();
    }
  });

  it('the controller prints the registration commands; running them lets it start', async () => {
    const cli = await locateTemporalCli();
    await createNamespace(cli, shared, { name: namespace, retention: '72h' });
    const config = { ...shared, namespace };
    const log = cluster.log('refused');
    const socket = `unix://${path.join(cluster.root, 'refused.sock')}`;
    const refused = spawnCli(
      ['controller', '--endpoint', socket, '--driver-name', cluster.driverName, ...temporalConfigFlags(config)],
      log,
    );
    const code = await new Promise<number | null>((resolve) => refused.once('exit', (exitCode) => resolve(exitCode)));
    const output = fs.readFileSync(log, 'utf8');
    expect(code).not.toBe(0);
    expect(output).toContain(`namespace "${namespace}" lacks the search attributes`);
    const commands = output
      .split('\n')
      .map((line) => line.trim())
      .filter((line) => line.startsWith('temporal operator search-attribute create --address'));
    expect(commands.length).toBeGreaterThanOrEqual(6);

    // Exactly as printed: they carry this server's address, namespace and TLS flags.
    for (const command of commands) await runAsPrinted(cli, command);

    process.env[CONFIG_ENV] = JSON.stringify(config); // this file's copy of the environment
    await cluster.startNode('node-o1');
    const controller = await cluster.startController('controller');
    const clients = cluster.csi(controller.endpoint);
    const created = await retryLikeCo(() => createVolume(clients, createRequest('pvc-ops')));
    expect(cluster.volumesOnDisk('node-o1')).toHaveLength(1);
    await retryLikeCo(() => deleteVolume(clients, created.volume?.volume_id ?? ''));
    expect(cluster.volumesOnDisk('node-o1')).toEqual([]);
  });
});
