import { searchAttributeCreateCommands } from '../temporal-dev/register-commands';
import { exec } from './exec';
import { FRONTEND_SERVER_NAME } from './certificates';
import type { NamespaceSpec, ProdTemporal } from './prod-temporal';

/** The `temporal` CLI's connection flags for this server (everything but the namespace). */
export function temporalCliConnectionFlags(cluster: Pick<ProdTemporal, 'address' | 'certificates'>): string[] {
  const flags = ['--address', cluster.address];
  const certs = cluster.certificates;
  if (certs) {
    flags.push('--tls-ca-path', certs.ca, '--tls-cert-path', certs.client.cert, '--tls-key-path', certs.client.key);
    flags.push('--tls-server-name', FRONTEND_SERVER_NAME);
  }
  return flags;
}

export function temporalCliFlags(cluster: Pick<ProdTemporal, 'address' | 'certificates'>, namespace: string): string[] {
  return [...temporalCliConnectionFlags(cluster), '--namespace', namespace];
}

/** `temporal operator namespace create --retention R`, as docs/operations.md tells an operator. */
export async function createNamespace(cluster: ProdTemporal, spec: NamespaceSpec): Promise<void> {
  const args = ['operator', 'namespace', 'create', '--retention', spec.retention];
  await retrying(
    60_000,
    () => exec(cluster.cli, [...args, ...temporalCliFlags(cluster, spec.name)]),
    (message) =>
      // A retried create whose first attempt went through.
      /already (exists|registered)/i.test(message),
  );
}

/**
 * Runs, with this server's connection flags appended, exactly the commands docs/operations.md prints and the
 * controller prints when they are missing (temporal-dev/register-commands.ts), so the documented path is the one
 * tested.
 */
export async function registerSearchAttributes(cluster: ProdTemporal, namespace: string): Promise<void> {
  for (const command of searchAttributeCreateCommands(namespace)) {
    const [program, ...args] = command.split(' ');
    if (program !== 'temporal') throw new Error(`unexpected registration command: ${command}`);
    await retrying(60_000, () => exec(cluster.cli, [...args, ...temporalCliConnectionFlags(cluster)]));
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
