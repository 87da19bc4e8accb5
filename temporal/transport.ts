import net from 'node:net';
import type { TemporalConfig } from './config';
import { usesTls } from './config';

/**
 * Refuses a Temporal setup that would quietly be weaker than it looks, before any connection is tried: a client
 * certificate without its key (or the reverse), and plaintext to a host other than this one. Temporal is the
 * driver's control plane: whoever can read or forge that traffic can delete every volume (docs/security.md).
 */
export function checkTemporalTransport(config: TemporalConfig): void {
  if (Boolean(config.tlsCert) !== Boolean(config.tlsKey)) {
    const [given, missing] = config.tlsCert
      ? ['--temporal-tls-cert', '--temporal-tls-key']
      : ['--temporal-tls-key', '--temporal-tls-cert'];
    throw new Error(`${given} needs ${missing} too: mTLS takes the client certificate and its key together`);
  }
  if (usesTls(config) || config.insecure) return;
  const host = hostOf(config.address);
  if (host !== undefined && isLoopbackHost(host)) return;
  throw new Error(
    `Temporal at ${config.address} would be reached in plaintext, without TLS or an API key: anyone on the path ` +
      "can read and forge the driver's control traffic. Use mTLS (--temporal-tls-cert, --temporal-tls-key, " +
      '--temporal-tls-ca) or an API key (--temporal-api-key-file), or pass --temporal-insecure ' +
      '(TEMPORAL_INSECURE=true) to accept plaintext on purpose (deploy/README.md)',
  );
}

/** The host of host:port ([v6]:port too); undefined when the address has no port. */
function hostOf(address: string): string | undefined {
  const match = /^\[?([^\]]+?)\]?:\d+$/.exec(address);
  return match?.[1];
}

/** 127.0.0.0/8, ::1 (and its v4-mapped form) and localhost: traffic that never leaves this network namespace. */
export function isLoopbackHost(host: string): boolean {
  const name = host.toLowerCase();
  if (name === 'localhost' || name.endsWith('.localhost')) return true;
  if (net.isIPv4(name)) return name.startsWith('127.');
  if (net.isIPv6(name)) {
    const v4 = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(name)?.[1];
    if (v4) return v4.startsWith('127.');
    return new net.SocketAddress({ address: name, family: 'ipv6' }).address === '::1';
  }
  return false;
}
