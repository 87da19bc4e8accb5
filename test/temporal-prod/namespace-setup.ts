import path from 'node:path';
import { runChecked } from '../../common/run-process';
import type { TemporalConfig } from '../../temporal/config';
import { searchAttributeCreateCommands, temporalCliConnectionFlags } from '../../temporal/register-commands';
import type { NamespaceSpec } from './prod-temporal';

/** `temporal operator namespace create --retention R`, as docs/operations.md tells an operator. */
export async function createNamespace(cli: string, config: TemporalConfig, spec: NamespaceSpec): Promise<void> {
  const args = ['operator', 'namespace', 'create', '--retention', spec.retention];
  await retrying(
    60_000,
    () => runChecked(cli, [...args, ...temporalCliConnectionFlags({ ...config, namespace: spec.name })]),
    (message) =>
      // A retried create whose first attempt went through.
      /already (exists|registered)/i.test(message),
  );
}

/**
 * Runs exactly the commands docs/operations.md shows and a controller prints when they are missing
 * (temporal/register-commands.ts: they carry the connection flags), through a shell as an operator pastes
 * them, with the CLI's directory first on PATH.
 */
export async function registerSearchAttributes(cli: string, config: TemporalConfig, namespace: string): Promise<void> {
  for (const command of searchAttributeCreateCommands({ ...config, namespace })) {
    await retrying(60_000, () => runAsPrinted(cli, command));
  }
}

/** A printed `temporal …` command line, run by sh with `temporal` resolving to the CLI the tests use. */
export function runAsPrinted(cli: string, command: string): Promise<string> {
  const env = { ...process.env, PATH: `${path.dirname(cli)}${path.delimiter}${process.env.PATH ?? ''}` };
  if (path.basename(cli) !== 'temporal')
    throw new Error(`${cli} is not named temporal: the printed commands call it so`);
  return runChecked('sh', ['-c', command], { env });
}

/** Retries while a just-started cluster is still assembling (membership ring, namespace cache). */
async function retrying(
  timeoutMs: number,
  attempt: () => Promise<unknown>,
  acceptable: (message: string) => boolean = () => false,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      await attempt();
      return;
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      if (acceptable(message)) return;
      if (Date.now() > deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, 1000));
    }
  }
}
