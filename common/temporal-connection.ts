import { NativeConnection } from '@temporalio/worker';
import { connectionOptions, usesTls, type TemporalConfig } from './temporal-config';
import { diagnoseTemporalTransport } from './tls-diagnosis';

/**
 * The agents' one connection, shared by their client and their worker: a native (Rust) connection costs less CPU
 * per call than the JavaScript gRPC client, and sharing it lets a workflow start hand its first task straight to
 * the worker in the same process (eager start: docs/performance.md). Fails with a message that names the address
 * and, when the transport is at fault, the exact problem (wrong CA, missing or refused client certificate, name
 * mismatch, plain server): the SDK alone gives one message for all of them.
 */
export async function connectTemporal(config: TemporalConfig): Promise<NativeConnection> {
  try {
    return await NativeConnection.connect(connectionOptions(config));
  } catch (error) {
    throw await explainConnectionFailure(config, error);
  }
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
