import fs from 'node:fs';
import type { ConnectionOptions } from '@temporalio/client';
import type { NativeConnectionOptions } from '@temporalio/worker';
import type { TlsMaterial } from './tls-files';

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

/**
 * The SDK's options for a config; the TLS files are read now, unless `material` gives their contents (a connection
 * made from a set temporal/tls-files.ts checked). Without a CA the system roots verify the server (Temporal Cloud).
 */
export function connectionOptions(
  config: TemporalConfig,
  material?: TlsMaterial,
): ConnectionOptions & NativeConnectionOptions {
  const ca = material ? material.ca : config.tlsCa ? fs.readFileSync(config.tlsCa) : undefined;
  const pair = material
    ? material.cert && material.key && { crt: material.cert, key: material.key }
    : config.tlsCert && config.tlsKey && { crt: fs.readFileSync(config.tlsCert), key: fs.readFileSync(config.tlsKey) };
  const tls = usesTls(config)
    ? { serverNameOverride: config.tlsServerName, serverRootCACertificate: ca, clientCertPair: pair || undefined }
    : undefined;
  const apiKey = config.apiKeyFile ? readApiKey(config.apiKeyFile) : undefined;
  return { address: config.address, tls, apiKey };
}

export function readApiKey(file: string): string {
  return fs.readFileSync(file, 'utf8').trim();
}
