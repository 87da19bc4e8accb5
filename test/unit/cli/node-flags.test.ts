import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { nodeCommand } from '../../../cli/node-command';
import { presenceHeartbeatEveryMs } from '../../../common/names';

describe('durable-csi node --presence-timeout', () => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'dcsi-node-flags-'));
  afterAll(() => fs.rmSync(root, { recursive: true, force: true }));

  /** Parses the flags as the CLI does; the action refuses them before the agent starts (nothing on disk). */
  function run(presenceTimeout: string): Promise<unknown> {
    const pool = path.join(root, 'pool');
    const args = ['--endpoint', `unix://${root}/node.sock`, '--node-id', 'node-1', '--pool', pool];
    return nodeCommand('flags.test.csi')
      .exitOverride()
      .parseAsync([...args, '--temporal-address', '127.0.0.1:1', '--presence-timeout', presenceTimeout], {
        from: 'user',
      });
  }

  it.each(['5s', '19s', '11m'])('refuses %s with the range and why, creating nothing', async (value) => {
    await expect(run(value)).rejects.toThrow(
      new RegExp(`--presence-timeout "${value}" must be between 20s and 10m: shorter, a heartbeat delayed`),
    );
    expect(fs.readdirSync(root)).toEqual([]);
  });

  it('refuses what is no duration', async () => {
    await expect(run('soon')).rejects.toThrow(/soon/);
    expect(fs.readdirSync(root)).toEqual([]);
  });
});

describe('durable-csi node --transfer-port and --transfer-address', () => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'dcsi-transfer-flags-'));
  afterAll(() => fs.rmSync(root, { recursive: true, force: true }));

  function run(flags: string[]): Promise<unknown> {
    const args = ['--endpoint', `unix://${root}/node.sock`, '--node-id', 'node-1', '--pool', path.join(root, 'pool')];
    return nodeCommand('flags.test.csi')
      .exitOverride()
      .parseAsync([...args, '--temporal-address', '127.0.0.1:1', ...flags], { from: 'user' });
  }

  it.each([
    [['--transfer-port', '7443'], /--transfer-port and --transfer-address go together/],
    [['--transfer-address', '10.0.0.1'], /--transfer-port and --transfer-address go together/],
    [['--transfer-port', '70000', '--transfer-address', '10.0.0.1'], /--transfer-port "70000" must be a TCP port/],
    [['--transfer-port', 'x', '--transfer-address', '10.0.0.1'], /--transfer-port "x" must be a TCP port/],
    [['--transfer-port', '7443', '--transfer-address', 'a b'], /--transfer-address "a b" must be a host name or an IP/],
  ])('refuses %j before anything starts', async (flags, said) => {
    await expect(run(flags)).rejects.toThrow(said);
    expect(fs.readdirSync(root)).toEqual([]);
  });
});

describe('the presence heartbeat cadence', () => {
  it('leaves a margin of a sixth of the timeout and at least 10 s, and heartbeats at least three times per timeout', () => {
    expect(presenceHeartbeatEveryMs(60_000)).toBe(50_000); // the default: five times fewer heartbeats than 0.2.0's 10 s
    expect(presenceHeartbeatEveryMs(30_000)).toBe(20_000); // a record of 0.2.0 holding a new agent
    expect(presenceHeartbeatEveryMs(20_000)).toBe(10_000); // the shortest --presence-timeout
    expect(presenceHeartbeatEveryMs(600_000)).toBe(500_000);
    for (const timeout of [20_000, 30_000, 45_000, 60_000, 120_000, 600_000]) {
      const every = presenceHeartbeatEveryMs(timeout);
      expect(timeout - every).toBeGreaterThanOrEqual(10_000);
      expect(every).toBeGreaterThanOrEqual(10_000); // the SDK's throttle (agent/worker-options.ts) sends each at once
    }
  });
});
