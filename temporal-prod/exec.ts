import { execFile } from 'node:child_process';

/** Runs a program to completion; rejects with its command line (secrets stay in env, never in args) and output. */
export function exec(command: string, args: string[], env: NodeJS.ProcessEnv = process.env): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(command, args, { env, maxBuffer: 16 * 1024 * 1024 }, (error, stdout, stderr) => {
      if (!error) return resolve(stdout);
      const output = `${stdout}${stderr}`.trim().split('\n').slice(-15).join('\n    ');
      const how = error.code === 'ENOENT' ? 'could not start (not found)' : `failed (${error.code ?? error.signal})`;
      reject(new Error(`\`${command} ${args.join(' ')}\` ${how}${output ? `:\n    ${output}` : ''}`));
    });
  });
}
