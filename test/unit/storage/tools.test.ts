import { FailureType } from '../../../common/failures';
import { ToolError, runTool } from '../../../storage/host/tools';

/** What a failed system tool means to the driver, with `sh` standing in for losetup, mkfs and the rest. */
// A kill that does not happen fails the test in seconds, not at the suite's two minutes.
jest.setTimeout(10_000);

describe('runTool', () => {
  const failure = (promise: Promise<unknown>) =>
    promise.then(
      () => {
        throw new Error('the tool was expected to fail');
      },
      (error: unknown) => {
        expect(error).toBeInstanceOf(ToolError);
        return error as ToolError;
      },
    );

  it('resolves with stdout, run with the C locale and the sbin directories on PATH', async () => {
    const out = await runTool('sh', ['-c', 'echo "$LC_ALL"; echo "$PATH"']);
    const [locale, path] = out.trim().split('\n');
    expect(locale).toBe('C');
    expect(path?.split(':')).toEqual(expect.arrayContaining(['/usr/sbin', '/sbin']));
  });

  it('fails Internal naming the command line and its stderr, which it keeps', async () => {
    const error = await failure(runTool('sh', ['-c', 'echo "No space left on device" >&2; exit 1']));
    expect(error.type).toBe(FailureType.Internal);
    expect(error.message).toBe('sh -c echo "No space left on device" >&2; exit 1 failed: No space left on device');
    expect(error.stderr).toBe('No space left on device\n');
  });

  it('says how a tool failed that printed nothing on stderr', async () => {
    const error = await failure(runTool('sh', ['-c', 'exit 4']));
    expect(error.message).toBe('sh -c exit 4 failed: exited with code 4');
  });

  it('fails FailedPrecondition for a tool that is not installed', async () => {
    const error = await failure(runTool('durable-csi-no-such-tool', []));
    expect(error.type).toBe(FailureType.FailedPrecondition);
    expect(error.message).toBe('durable-csi-no-such-tool is not installed on this node');
  });

  it('kills a tool that runs past its timeout', async () => {
    const error = await failure(runTool('sh', ['-c', 'exec sleep 30'], { timeoutMs: 300 }));
    expect(error.type).toBe(FailureType.Internal);
    expect(error.message).toBe('sh -c exec sleep 30 failed: timed out after 0.3s');
  });

  it('accepts the exit codes it is told mean success', async () => {
    await expect(runTool('sh', ['-c', 'echo corrected; exit 1'], { okExitCodes: [1] })).resolves.toBe('corrected\n');
    await failure(runTool('sh', ['-c', 'exit 2'], { okExitCodes: [1] }));
  });

  it('fails on stderr output despite exit code 0 when told to', async () => {
    const error = await failure(runTool('sh', ['-c', 'echo "quota: bad project" >&2'], { stderrFails: true }));
    expect(error.message).toBe('sh -c echo "quota: bad project" >&2 failed: quota: bad project');
    await expect(runTool('sh', ['-c', 'echo warning >&2; echo ok'])).resolves.toBe('ok\n');
  });
});
