import type { TemporalConfig } from './config';
import { SEARCH_ATTRIBUTES } from './search-attributes';

/**
 * `temporal operator search-attribute create` lines registering durable-csi's attributes, ready to paste: they
 * name the same server, namespace and TLS settings the controller was given. The API key is read from its file
 * into TEMPORAL_API_KEY by the shell, so it is neither printed nor visible in a process listing.
 */
export function searchAttributeCreateCommands(
  temporal: TemporalConfig,
  names: readonly string[] = Object.keys(SEARCH_ATTRIBUTES),
): string[] {
  const prefix = temporal.apiKeyFile ? `TEMPORAL_API_KEY="$(cat ${shellQuote(temporal.apiKeyFile)})" ` : '';
  const connection = temporalCliConnectionFlags(temporal).map(shellQuote).join(' ');
  return names
    .filter((name) => name in SEARCH_ATTRIBUTES)
    .map(
      (name) =>
        `${prefix}temporal operator search-attribute create ${connection} --name ${name} --type ${SEARCH_ATTRIBUTES[name]}`,
    );
}

/** Our connection settings as the Temporal CLI's global flags (`temporal options`). */
export function temporalCliConnectionFlags(temporal: TemporalConfig): string[] {
  const flags = ['--address', temporal.address, '--namespace', temporal.namespace];
  // The CLI turns TLS on by itself for cert, CA or API key; --tls says so for the plain TLS case too.
  if (temporal.tls || temporal.tlsCert || temporal.tlsCa || temporal.apiKeyFile) flags.push('--tls');
  if (temporal.tlsCert) flags.push('--tls-cert-path', temporal.tlsCert);
  if (temporal.tlsKey) flags.push('--tls-key-path', temporal.tlsKey);
  if (temporal.tlsCa) flags.push('--tls-ca-path', temporal.tlsCa);
  if (temporal.tlsServerName) flags.push('--tls-server-name', temporal.tlsServerName);
  return flags;
}

/** POSIX shell quoting: plain words stay readable, anything else is single-quoted. */
export function shellQuote(word: string): string {
  if (/^[A-Za-z0-9_./:@%+=,-]+$/.test(word)) return word;
  return `'${word.replace(/'/g, `'\\''`)}'`;
}
