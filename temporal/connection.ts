import { NativeConnection } from '@temporalio/worker';
import { connectionOptions, usesTls, type TemporalConfig } from './config';
import { followApiKeyFile } from './api-key-file';
import { diagnoseTemporalTransport } from './tls-diagnosis';

/**
 * The agents' one connection, shared by their client and their worker: a native (Rust) connection costs less CPU
 * per call than the JavaScript gRPC client, and sharing it lets a workflow start hand its first task straight to
 * the worker in the same process (eager start: docs/performance.md). Fails with a message that names the address
 * and, when the transport is at fault, the exact problem (wrong CA, missing or refused client certificate, name
 * mismatch, plain server): the SDK alone gives one message for all of them. An API key file is followed: a rotated
 * key replaces the live connection's (temporal/api-key-file.ts).
 */
export async function connectTemporal(
  config: TemporalConfig,
  onError: (message: string) => void = (message) => process.stderr.write(`${message}\n`),
): Promise<NativeConnection> {
  const options = connectionOptions(config);
  let connection: NativeConnection;
  try {
    connection = await NativeConnection.connect(options);
  } catch (error) {
    throw await explainConnectionFailure(config, error);
  }
  if (config.apiKeyFile && options.apiKey !== undefined) {
    const live = connection;
    const stop = followApiKeyFile(config.apiKeyFile, options.apiKey, (key) => live.setApiKey(key), onError);
    const close = live.close.bind(live);
    live.close = async () => {
      stop();
      await close();
    };
  }
  return connection;
}

/**
 * A connection that failed, and whether a retry may outlast the cause. `unreachable`: nothing answered at the
 * address (refused, no route, no name, no handshake in time), or the transport works and the SDK still failed (a
 * server starting): an outage. Otherwise the transport diagnosis names a misconfiguration (the CA, a client
 * certificate, the server name, TLS on one side only, a malformed address) that no retry fixes.
 */
export class TemporalConnectionError extends Error {
  constructor(
    message: string,
    readonly unreachable: boolean,
    options: ErrorOptions,
  ) {
    super(message, options);
    this.name = 'TemporalConnectionError';
  }
}

/** The transport diagnoses (temporal/tls-diagnosis.ts) that mean nothing answered, as opposed to a misconfiguration. */
const NOTHING_ANSWERED = /^(cannot reach it \(|no TLS handshake within )/;

export async function explainConnectionFailure(
  config: TemporalConfig,
  error: unknown,
): Promise<TemporalConnectionError> {
  const original = error instanceof Error ? error.message : String(error);
  const diagnosis = await diagnoseTemporalTransport(config).catch(() => undefined);
  const how = usesTls(config) ? ' over TLS' : '';
  return new TemporalConnectionError(
    `cannot connect to Temporal at ${config.address}${how}: ${diagnosis ?? original}` +
      (diagnosis ? ` (SDK: ${original})` : ''),
    diagnosis === undefined || NOTHING_ANSWERED.test(diagnosis),
    { cause: error },
  );
}
