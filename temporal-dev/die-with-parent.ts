import * as fs from 'fs';
import * as path from 'path';

/**
 * How to start a program that the kernel stops (SIGTERM) when the process that started it dies, even by
 * SIGKILL: PR_SET_PDEATHSIG through util-linux's `setpriv --pdeathsig`, which sets it and execs the program
 * (same pid). Node cannot set it itself. Undefined where setpriv is missing (not Linux): the caller then
 * has no such guarantee and should keep the child where a terminal's Ctrl-C still reaches it.
 */
export function dieWithParent(command: string, args: readonly string[]): [string, string[]] | undefined {
  const setpriv = process.platform === 'linux' ? findExecutable('setpriv') : undefined;
  return setpriv ? [setpriv, ['--pdeathsig', 'TERM', '--', command, ...args]] : undefined;
}

function findExecutable(name: string): string | undefined {
  for (const dir of [...(process.env.PATH ?? '').split(path.delimiter), '/usr/bin', '/bin']) {
    if (dir === '') continue;
    const candidate = path.join(dir, name);
    try {
      fs.accessSync(candidate, fs.constants.X_OK);
      return candidate;
    } catch {
      // next
    }
  }
  return undefined;
}
