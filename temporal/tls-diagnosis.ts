import fs from 'node:fs';
import net from 'node:net';
import tls from 'node:tls';
import type { TemporalConfig } from './config';
import { usesTls } from './config';

const TIMEOUT_MS = 5_000;
/** HTTP/2 connection preface and an empty SETTINGS frame: a gRPC server answers with its own SETTINGS. */
const H2_PREFACE = Buffer.concat([
  Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n'),
  Buffer.from([0, 0, 0, 4, 0, 0, 0, 0, 0]),
]);
const UNTRUSTED = new Set([
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'CERT_UNTRUSTED',
]);

/**
 * Why a connection to the Temporal frontend fails, found by redoing the TLS handshake (and the first HTTP/2
 * exchange, where a TLS 1.3 server refuses a missing or unknown client certificate) with Node's own TLS stack,
 * because the SDK reports every such failure as "Failed to connect before the deadline". Undefined when the
 * transport works and the problem lies elsewhere.
 */
export async function diagnoseTemporalTransport(config: TemporalConfig): Promise<string | undefined> {
  const target = parseHostPort(config.address);
  if (!target) return `"${config.address}" is not host:port`;
  return usesTls(config) ? diagnoseTls(config, target) : diagnosePlain(target);
}

interface Target {
  host: string;
  port: number;
}

function parseHostPort(address: string): Target | undefined {
  const match = /^\[?([^\]]+?)\]?:(\d+)$/.exec(address);
  return match?.[1] && match[2] ? { host: match[1], port: Number(match[2]) } : undefined;
}

/** Without TLS flags: unreachable, or a server that expects TLS. */
async function diagnosePlain(target: Target): Promise<string | undefined> {
  const outcome = await handshake({ host: target.host, port: target.port, rejectUnauthorized: false });
  if (outcome.kind === 'network') return outcome.message;
  if (outcome.kind === 'connected') {
    outcome.socket.destroy();
    return 'the server speaks TLS and no TLS flag is set: add --temporal-tls-ca (and --temporal-tls-cert/--temporal-tls-key for mTLS) or --temporal-tls';
  }
  return undefined;
}

async function diagnoseTls(config: TemporalConfig, target: Target): Promise<string | undefined> {
  const name = config.tlsServerName ?? (net.isIP(target.host) ? undefined : target.host);
  const outcome = await handshake({
    host: target.host,
    port: target.port,
    servername: name,
    ca: config.tlsCa ? fs.readFileSync(config.tlsCa) : defaultRoots(),
    cert: config.tlsCert ? fs.readFileSync(config.tlsCert) : undefined,
    key: config.tlsKey ? fs.readFileSync(config.tlsKey) : undefined,
    ALPNProtocols: ['h2'],
    // Verified below, so that the certificate can be described when it is refused.
    rejectUnauthorized: false,
  });
  if (outcome.kind === 'network') return outcome.message;
  if (outcome.kind === 'tls-error') return tlsErrorMessage(outcome.code, outcome.message, config);
  const { socket } = outcome;
  try {
    const peer = socket.getPeerCertificate();
    const roots = config.tlsCa ? `the CA in ${config.tlsCa}` : 'the system roots';
    const reason = socket.authorized ? undefined : String(socket.authorizationError);
    if (reason !== undefined && UNTRUSTED.has(reason))
      return `the server's certificate (${describe(peer)}) is not signed by ${roots} (${reason}); check --temporal-tls-ca`;
    const expected = name ?? target.host;
    if (reason === 'ERR_TLS_CERT_ALTNAME_INVALID' || tls.checkServerIdentity(expected, peer)) {
      return (
        `the server's certificate is for ${peer.subjectaltname ?? describe(peer)}, not "${expected}": ` +
        'set --temporal-tls-server-name to a name it holds'
      );
    }
    if (reason !== undefined) return `the server's certificate (${describe(peer)}) is not valid: ${reason}`;
    return await firstExchange(socket, config);
  } finally {
    socket.destroy();
  }
}

/** The roots the SDK's grpc-js client trusts without --temporal-tls-ca (NODE_EXTRA_CA_CERTS is not among them). */
function defaultRoots(): string | Buffer | string[] {
  const file = process.env.GRPC_DEFAULT_SSL_ROOTS_FILE_PATH;
  return file ? fs.readFileSync(file) : [...tls.rootCertificates];
}

/** TLS 1.3 servers check the client certificate after the handshake: their refusal arrives as an alert here. */
function firstExchange(socket: tls.TLSSocket, config: TemporalConfig): Promise<string | undefined> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(undefined), TIMEOUT_MS);
    const done = (result: string | undefined) => {
      clearTimeout(timer);
      resolve(result);
    };
    socket.once('data', () => done(undefined));
    socket.once('error', (error: NodeJS.ErrnoException) =>
      done(tlsErrorMessage(error.code ?? '', error.message, config)),
    );
    socket.once('close', () => done(undefined));
    socket.write(H2_PREFACE);
  });
}

function tlsErrorMessage(code: string, message: string, config: TemporalConfig): string {
  const text = `${code} ${message}`;
  if (/CERTIFICATE_REQUIRED|certificate required/i.test(text)) {
    return config.tlsCert
      ? `the server did not accept the client certificate ${config.tlsCert} (${code || message})`
      : 'the server requires a client certificate (mTLS): pass --temporal-tls-cert and --temporal-tls-key';
  }
  if (/UNKNOWN_CA|BAD_CERTIFICATE|unknown ca|bad certificate|DECRYPT_ERROR/i.test(text)) {
    return `the server refused the client certificate ${config.tlsCert ?? ''} (${code || message}): it is not signed by a CA the server trusts`;
  }
  if (/WRONG_VERSION_NUMBER|wrong version number|PACKET_LENGTH_TOO_LONG|record layer failure/i.test(text)) {
    return 'the server does not speak TLS on this port: remove the TLS flags, or check the address';
  }
  return `TLS failed: ${code ? `${code}: ` : ''}${message}`;
}

function describe(cert: tls.PeerCertificate): string {
  const subject = cert.subject?.CN ? `CN=${cert.subject.CN}` : 'no subject CN';
  const issuer = cert.issuer?.CN ? `CN=${cert.issuer.CN}` : 'unknown issuer';
  return `${subject}, issued by ${issuer}`;
}

type Outcome =
  | { kind: 'connected'; socket: tls.TLSSocket }
  | { kind: 'network'; message: string }
  | { kind: 'tls-error'; code: string; message: string };

const NETWORK_CODES = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'ETIMEDOUT']);

function handshake(options: tls.ConnectionOptions & Target): Promise<Outcome> {
  return new Promise((resolve) => {
    const socket = tls.connect(options);
    const timer = setTimeout(() => {
      socket.destroy();
      resolve({ kind: 'network', message: `no TLS handshake within ${TIMEOUT_MS / 1000} s` });
    }, TIMEOUT_MS);
    socket.once('secureConnect', () => {
      clearTimeout(timer);
      socket.removeAllListeners('error');
      socket.on('error', () => undefined); // reported by firstExchange
      resolve({ kind: 'connected', socket });
    });
    socket.once('error', (error: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      socket.destroy();
      const code = error.code ?? '';
      if (NETWORK_CODES.has(code)) resolve({ kind: 'network', message: `cannot reach it (${code})` });
      else resolve({ kind: 'tls-error', code, message: error.message });
    });
  });
}
