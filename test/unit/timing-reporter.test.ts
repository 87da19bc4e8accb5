import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/**
 * The timing reporter (test/support/timing-reporter.js) keeps what failed, in words, for scripts/test.js to print at
 * the end of the run: a real jest run of a file with one failing and one passing test, the reporter among its
 * reporters, and the timings file it wrote read back.
 */
describe('the timing reporter', () => {
  let dir: string;
  beforeAll(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dcsi-timing-reporter-'));
    fs.writeFileSync(
      path.join(dir, 'two.test.js'),
      [
        "test('passes', () => expect(1).toBe(1));",
        "test('fails on purpose', () => expect({ volume: 'kept' }).toEqual({ volume: 'gone' }));",
      ].join('\n'),
    );
    fs.writeFileSync(path.join(dir, 'jest.config.js'), 'module.exports = { testEnvironment: "node" };');
  });
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('names each failed test with its message, colours and deep stack left out', () => {
    const jest = require.resolve('jest/bin/jest');
    const reporter = path.resolve(__dirname, '..', 'support', 'timing-reporter.js');
    let code = 0;
    try {
      execFileSync(process.execPath, [jest, '--rootDir', dir, '--ci', `--reporters=${reporter}`], {
        cwd: dir,
        env: { ...process.env, DURABLE_CSI_TIMING_PHASE: 'probe', FORCE_COLOR: '1' },
        stdio: 'pipe',
      });
    } catch (error) {
      code = (error as { status?: number }).status ?? -1;
    }
    expect(code).toBe(1);
    const written = JSON.parse(fs.readFileSync(path.join(dir, 'test-artifacts', 'timings', 'probe.json'), 'utf8')) as {
      suites: { suite: string; failed: boolean }[];
      failures: { suite: string; test: string; message: string }[];
    };
    expect(written.suites).toEqual([expect.objectContaining({ suite: 'two.test.js', failed: true })]);
    expect(written.failures).toHaveLength(1);
    const [failure] = written.failures;
    expect(failure?.suite).toBe('two.test.js');
    expect(failure?.test).toBe('fails on purpose');
    expect(failure?.message).toContain('"volume": "gone"');
    expect(failure?.message).not.toContain(`${String.fromCharCode(27)}[`); // no colour codes
    expect(failure?.message.split('\n').filter((line) => /^\s+at /.test(line)).length).toBeLessThanOrEqual(3);
  });
});
