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

export async function explainConnectionFailure(config: TemporalConfig, error: unknown): Promise<Error> {
  const original = error instanceof Error ? error.message : String(error);
  const diagnosis = await diagnoseTemporalTransport(config).catch(() => undefined);
  const how = usesTls(config) ? ' over TLS' : '';
  return new Error(
    `cannot connect to Temporal at ${config.address}${how}: ${diagnosis ?? original}` +
      (diagnosis ? ` (SDK: ${original})` : ''),
    { cause: error },
  );
}
