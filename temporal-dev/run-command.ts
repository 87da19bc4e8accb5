import { spawn } from 'child_process';

export interface CommandResult {
  code: number | null;
  /** Combined stdout+stderr, capped to the last `maxChars` characters. */
  output: string;
  /** Set when the program could not be started at all (e.g. ENOENT). */
  spawnError?: Error;
}

/** Runs a program to completion; never rejects. `echo` mirrors its output to our stderr (progress). */
export function runCommand(
  command: string,
  args: readonly string[],
  options: { echo?: boolean; maxChars?: number } = {},
): Promise<CommandResult> {
  const maxChars = options.maxChars ?? 4000;
  return new Promise((resolve) => {
    let output = '';
    const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    const collect = (chunk: Buffer): void => {
      if (options.echo === true) process.stderr.write(chunk);
      output = (output + chunk.toString('utf8')).slice(-maxChars);
    };
    child.stdout.on('data', collect);
    child.stderr.on('data', collect);
    child.on('error', (spawnError) => resolve({ code: null, output, spawnError }));
    child.on('close', (code) => resolve({ code, output }));
  });
}

/** One line describing why a command failed, for error messages. */
export function describeFailure(command: string, result: CommandResult): string {
  if (result.spawnError !== undefined) return `\`${command}\` could not start: ${result.spawnError.message}`;
  const tail = result.output.trim().split('\n').slice(-10).join('\n    ');
  return `\`${command}\` exited with code ${String(result.code)}${tail === '' ? '' : `:\n    ${tail}`}`;
}
