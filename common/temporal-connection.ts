import { Connection } from '@temporalio/client';
import { connectionOptions, usesTls, type TemporalConfig } from './temporal-config';
import { diagnoseTemporalTransport } from './tls-diagnosis';

/**
 * Connection.connect, failing with a message that names the address and, when the transport is at fault, the exact
 * problem (wrong CA, missing or refused client certificate, name mismatch, plain server): the SDK alone says
 * "Failed to connect before the deadline" for all of them.
 */
export async function connectTemporal(config: TemporalConfig): Promise<Connection> {
  try {
    return await Connection.connect(connectionOptions(config));
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
