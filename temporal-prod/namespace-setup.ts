import { searchAttributeCreateCommands } from '../temporal-dev/register-commands';
import { exec } from './exec';
import type { TemporalConfig } from '../common/temporal-config';
import type { NamespaceSpec } from './prod-temporal';

/** The `temporal` CLI's connection flags (everything but the namespace) for a driver connection config. */
export function temporalCliConnectionFlags(config: TemporalConfig): string[] {
  const flags = ['--address', config.address];
  if (config.tls) flags.push('--tls');
  if (config.tlsCa) flags.push('--tls-ca-path', config.tlsCa);
  if (config.tlsCert) flags.push('--tls-cert-path', config.tlsCert);
  if (config.tlsKey) flags.push('--tls-key-path', config.tlsKey);
  if (config.tlsServerName) flags.push('--tls-server-name', config.tlsServerName);
  return flags;
}

/** `temporal operator namespace create --retention R`, as docs/operations.md tells an operator. */
export async function createNamespace(cli: string, config: TemporalConfig, spec: NamespaceSpec): Promise<void> {
  const args = ['operator', 'namespace', 'create', '--retention', spec.retention, '--namespace', spec.name];
  await retrying(
    60_000,
    () => exec(cli, [...args, ...temporalCliConnectionFlags(config)]),
    (message) =>
      // A retried create whose first attempt went through.
      /already (exists|registered)/i.test(message),
  );
}

/**
 * Runs, with the connection flags appended, exactly the commands docs/operations.md prints and the controller
 * prints when they are missing (temporal-dev/register-commands.ts), so the documented path is the one tested.
 */
export async function registerSearchAttributes(cli: string, config: TemporalConfig, namespace: string): Promise<void> {
  for (const command of searchAttributeCreateCommands(namespace)) {
    const [program, ...args] = command.split(' ');
    if (program !== 'temporal') throw new Error(`unexpected registration command: ${command}`);
    await retrying(60_000, () => exec(cli, [...args, ...temporalCliConnectionFlags(config)]));
  }
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
