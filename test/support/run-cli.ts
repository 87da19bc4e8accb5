import { execFile } from 'node:child_process';
import { CLI_MAIN } from '../../agent/spawn-cli';

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs the compiled `durable-csi` once as its own process and collects what it printed. */
export function runCli(
  args: string[],
  options: { env?: NodeJS.ProcessEnv; timeoutMs?: number } = {},
): Promise<CliResult> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [CLI_MAIN, ...args],
      { timeout: options.timeoutMs ?? 60_000, env: options.env ?? process.env },
      (error, stdout, stderr) => {
        const code = error ? (typeof error.code === 'number' ? error.code : -1) : 0;
        resolve({ code, stdout, stderr });
      },
    );
  });
}
