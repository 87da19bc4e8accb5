import { Connection } from '@temporalio/client';
import { msToTs } from '@temporalio/common/lib/time';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { locateTemporalCli } from '../../temporal-dev/locate-cli';
import { TestCluster, temporalAddress } from '../support/cluster';
import { runCli } from '../support/run-cli';
import { eventually } from '../support/eventually';

/**
 * A controller given a namespace without durable-csi's search attributes refuses to start and prints the
 * commands that register them. Run exactly as printed, they must reach the server the controller was given
 * (not the CLI's default localhost:7233), after which the controller starts.
 */
describe('the search-attribute commands a controller prints', () => {
  const cluster = new TestCluster('sa-commands');
  const namespace = `sa-${Date.now().toString(36)}`;
  const bin = fs.mkdtempSync(path.join(os.tmpdir(), 'dcsi-bin-'));
  afterAll(async () => {
    await cluster.teardown();
    fs.rmSync(bin, { recursive: true, force: true });
  });

  it('work as printed against that server and namespace', async () => {
    const connection = await Connection.connect({ address: temporalAddress() });
    try {
      await connection.workflowService.registerNamespace({
        namespace,
        workflowExecutionRetentionPeriod: msToTs('1 day'),
      });
      await eventually('the namespace registered', () =>
        connection.workflowService.describeNamespace({ namespace }).then(
          () => true,
          () => false,
        ),
      );
    } finally {
      await connection.close();
    }
    const controllerArgs = ['--driver-name', cluster.driverName, '--temporal-address', temporalAddress()];
    const refused = await runCli([
      'controller',
      '--endpoint',
      `unix://${path.join(cluster.root, 'refused.sock')}`,
      ...controllerArgs,
      '--temporal-namespace',
      namespace,
    ]);
    expect(refused.code).toBe(1);
    const commands = refused.stderr
      .split('\n')
      .map((line) => line.trim())
      .filter((line) => line.startsWith('temporal operator search-attribute create'));
    // The claim's attributes (new in 0.3.0) are not required: an upgrade from 0.2.0 needs no step before it.
    expect(commands).toHaveLength(6);
    expect(refused.stderr).not.toContain('DurableCsiPvc');

    // `temporal` as the printed commands spell it, and nothing from the environment pointing at a server.
    fs.symlinkSync(await locateTemporalCli(), path.join(bin, 'temporal'));
    const env = { PATH: `${bin}:${process.env.PATH ?? ''}`, HOME: bin };
    for (const command of commands) {
      await new Promise<void>((resolve, reject) =>
        execFile('sh', ['-c', command], { env, timeout: 60_000 }, (error, stdout, stderr) =>
          error ? reject(new Error(`${command} failed: ${stderr}${stdout}`)) : resolve(),
        ),
      );
    }
    // Registered attributes reach the namespace asynchronously; the controller starts once they have, warning that
    // the claim's two are missing and printing their commands.
    await eventually(
      'controller start after registering the attributes',
      async () => {
        try {
          return await cluster.startController('controller', ['--temporal-namespace', namespace]);
        } catch {
          return undefined;
        }
      },
      60_000,
    );
    const log = fs.readFileSync(cluster.log('controller'), 'utf8');
    expect(log).toContain('--name DurableCsiPvcNamespace --type Keyword');
    expect(log).toContain('--name DurableCsiPvcName --type Keyword');
    const byClaim = await runCli([
      'volumes',
      'describe',
      '--pvc',
      'team-a/data-db-0',
      '--driver-name',
      cluster.driverName,
      '--temporal-address',
      temporalAddress(),
      '--temporal-namespace',
      namespace,
    ]);
    expect(byClaim.code).toBe(1);
    expect(byClaim.stderr).toMatch(
      /the namespace lacks the search attributes DurableCsiPvcNamespace and DurableCsiPvcName/,
    );
  });
});
