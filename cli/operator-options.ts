import type { Client } from '@temporalio/client';
import { Option } from 'commander';
import type { Command } from 'commander';
import { DriverError } from '../common/failures';
import { DEFAULT_DRIVER_NAME } from '../common/names';
import { connectionOptions } from '../temporal/config';
import { formatDuration } from '../common/duration';
import { addTemporalOptions, temporalConfig } from './temporal-options';
import type { TemporalFlags } from './temporal-options';

/** Flags of the operator commands, which read Temporal directly rather than the CSI socket. */
export interface OperatorFlags extends TemporalFlags {
  driverName: string;
  output: 'table' | 'json';
}

export function addOperatorOptions(command: Command): Command {
  command
    .option('--driver-name <name>', 'CSI driver name', DEFAULT_DRIVER_NAME)
    .addOption(
      new Option('--output <format>', 'table for people, json (stable field names) for scripts')
        .choices(['table', 'json'])
        .default('table'),
    );
  return addTemporalOptions(command);
}

/** Lazy: bad input is refused before any connection attempt, which can take seconds to fail. */
export async function withTemporalClient<T>(flags: OperatorFlags, body: (client: Client) => Promise<T>): Promise<T> {
  // Loaded here, not at the top: the CLI's other commands should not pay for the client (cli/main.ts).
  const { Client, Connection, ServiceError } = await import('@temporalio/client');
  const config = temporalConfig(flags);
  const connection = Connection.lazy(connectionOptions(config));
  try {
    return await body(new Client({ connection, namespace: flags.temporalNamespace }));
  } catch (error) {
    // The lazy connection fails on the first call: say why, as the controller does at start. A DriverError is
    // the driver's own answer (a node that did not answer, say), whatever words it uses.
    if (!(error instanceof DriverError) && isConnectFailure(error)) {
      const { explainConnectionFailure } = await import('../temporal/connection');
      throw await explainConnectionFailure(config, error);
    }
    // The SDK's message ("Failed to list workflows") hides the reason: unreachable, unknown attribute, ...
    if (!(error instanceof ServiceError) || !(error.cause instanceof Error)) throw error;
    throw new Error(`${error.message} (Temporal at ${flags.temporalAddress}): ${error.cause.message.trim()}`);
  } finally {
    await connection.close();
  }
}

function isConnectFailure(error: unknown): boolean {
  const messages = [error, error instanceof Error ? error.cause : undefined].map((e) =>
    e instanceof Error ? e.message : '',
  );
  return messages.some((message) => /failed to connect|UNAVAILABLE|connection|handshake|certificate/i.test(message));
}

/** Dates become ISO 8601 strings (Date.toJSON). */
export function printJson(value: unknown): void {
  process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
}

export function ageOf(since: Date | number, now: number): string {
  return formatDuration(now - (typeof since === 'number' ? since : since.getTime()));
}

export function secondsSince(since: Date | number, now: number): number {
  return Math.max(0, Math.round((now - (typeof since === 'number' ? since : since.getTime())) / 1000));
}
