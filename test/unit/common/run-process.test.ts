import { describeFailure, runChecked, runProcess, succeeded } from '../../../common/run-process';

/** Real child processes (sh), not a mock: the runner is the one place the project starts a program to completion. */
// A kill that does not happen fails the test in seconds, not at the suite's two minutes.
jest.setTimeout(10_000);

describe('runProcess', () => {
  it('collects stdout and stderr apart, and interleaved as they came', async () => {
    // The pauses order the two pipes' chunks: what comes at once on both may arrive in either order.
    const result = await runProcess('sh', ['-c', 'echo one; sleep 0.2; echo two >&2; sleep 0.2; echo three']);
    expect(succeeded(result)).toBe(true);
    expect(result).toMatchObject({ code: 0, signal: null, stdout: 'one\nthree\n', stderr: 'two\n' });
    expect(result.output).toBe('one\ntwo\nthree\n');
    expect(result.commandLine).toBe('sh -c echo one; sleep 0.2; echo two >&2; sleep 0.2; echo three');
  });

  it('gives the program the environment it is given, and ours otherwise', async () => {
    const given = await runProcess('sh', ['-c', 'printf %s "$RUN_PROCESS_TEST"'], {
      env: { PATH: process.env.PATH, RUN_PROCESS_TEST: 'given' },
    });
    expect(given.stdout).toBe('given');
    process.env.RUN_PROCESS_TEST = 'ours';
    try {
      expect((await runProcess('sh', ['-c', 'printf %s "$RUN_PROCESS_TEST"'])).stdout).toBe('ours');
    } finally {
      delete process.env.RUN_PROCESS_TEST;
    }
  });

  it('reports a non-zero exit with its code and what the program printed', async () => {
    const result = await runProcess('sh', ['-c', 'echo partial; echo "no such volume" >&2; exit 3']);
    expect(succeeded(result)).toBe(false);
    expect(result.code).toBe(3);
    expect(describeFailure(result)).toBe(
      '`sh -c echo partial; echo "no such volume" >&2; exit 3` exited with code 3:\n    partial\n    no such volume',
    );
  });

  it('kills a program that runs past its timeout', async () => {
    const started = Date.now();
    const result = await runProcess('sh', ['-c', 'echo started; exec sleep 30'], { timeoutMs: 300 });
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(result).toMatchObject({ killedFor: 'timeout', signal: 'SIGKILL', code: null, stdout: 'started\n' });
    expect(succeeded(result)).toBe(false);
    expect(describeFailure(result)).toMatch(/^`sh -c echo started; exec sleep 30` timed out \(killed\):\n {4}started$/);
  });

  it('kills a program that prints more than it may keep', async () => {
    const result = await runProcess('sh', ['-c', 'exec yes'], { maxBuffer: 1000 });
    expect(result.killedFor).toBe('stdout');
    expect(result.stdout).toHaveLength(1000);
    expect(succeeded(result)).toBe(false);
  });

  it('reports a program that does not exist, without rejecting', async () => {
    const result = await runProcess('/nonexistent/durable-csi-tool', ['--flag']);
    expect(result.spawnError?.code).toBe('ENOENT');
    expect(succeeded(result)).toBe(false);
    expect(describeFailure(result)).toBe('`/nonexistent/durable-csi-tool --flag` could not start (not found)');
  });

  it('reports a program killed by a signal', async () => {
    const result = await runProcess('sh', ['-c', 'kill -TERM $$']);
    expect(result).toMatchObject({ code: null, signal: 'SIGTERM' });
    expect(describeFailure(result)).toBe('`sh -c kill -TERM $$` was killed by SIGTERM');
  });

  it('gives stdin /dev/null unless asked to leave a pipe open', async () => {
    expect((await runProcess('sh', ['-c', 'cat; echo done'])).stdout).toBe('done\n');
    const piped = await runProcess('sh', ['-c', 'exec cat'], { stdin: 'pipe', timeoutMs: 300 });
    expect(piped.killedFor).toBe('timeout');
  });

  it('mirrors the output on our stderr when asked to', async () => {
    const write = jest.spyOn(process.stderr, 'write').mockImplementation(() => true);
    try {
      await runProcess('sh', ['-c', 'echo progress'], { echo: true });
      expect(write).toHaveBeenCalledWith('progress\n');
      write.mockClear();
      await runProcess('sh', ['-c', 'echo quiet']);
      expect(write).not.toHaveBeenCalled();
    } finally {
      write.mockRestore();
    }
  });
});

describe('runChecked', () => {
  it('resolves with stdout', async () => {
    await expect(runChecked('sh', ['-c', 'echo out; echo err >&2'])).resolves.toBe('out\n');
  });

  it('rejects naming the command line, the exit code and stderr', async () => {
    await expect(runChecked('sh', ['-c', 'echo "permission denied" >&2; exit 1'])).rejects.toThrow(
      '`sh -c echo "permission denied" >&2; exit 1` exited with code 1:\n    permission denied',
    );
  });
});
