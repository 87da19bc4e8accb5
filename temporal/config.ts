import fs from 'node:fs';
import type { ConnectionOptions } from '@temporalio/client';
import type { NativeConnectionOptions } from '@temporalio/worker';

/** How to reach Temporal: the dev server by default, or a production cluster / Temporal Cloud with TLS. */
export interface TemporalConfig {
  address: string;
  namespace: string;
  /** Client certificate and key for mTLS. */
  tlsCert?: string;
  tlsKey?: string;
  /** CA bundle to verify the server with; system roots when absent. */
  tlsCa?: string;
  tlsServerName?: string;
  /** Forces TLS on without client certificates (Temporal Cloud with an API key). */
  tls?: boolean;
  /** Read from a file so that it never appears in a process listing; read again when it changes. */
  apiKeyFile?: string;
  /** The operator's explicit acceptance of plaintext to a non-loopback address (temporal/transport.ts). */
  insecure?: boolean;
}

/**
 * TLS is on with any TLS flag (a server name or CA to verify against means TLS too) or an API key (Temporal Cloud
 * takes API keys over TLS only).
 */
export function usesTls(config: TemporalConfig): boolean {
  return Boolean(
    config.tls || config.tlsCert || config.tlsKey || config.tlsCa || config.tlsServerName || config.apiKeyFile,
  );
}

export function connectionOptions(config: TemporalConfig): ConnectionOptions & NativeConnectionOptions {
  const tls = usesTls(config)
    ? {
        serverNameOverride: config.tlsServerName,
        serverRootCACertificate: config.tlsCa ? fs.readFileSync(config.tlsCa) : undefined,
        clientCertPair:
          config.tlsCert && config.tlsKey
            ? { crt: fs.readFileSync(config.tlsCert), key: fs.readFileSync(config.tlsKey) }
            : undefined,
      }
    : undefined;
  const apiKey = config.apiKeyFile ? readApiKey(config.apiKeyFile) : undefined;
  return { address: config.address, tls, apiKey };
}

export function readApiKey(file: string): string {
  return fs.readFileSync(file, 'utf8').trim();
}
