import fs from 'node:fs';
import { DriverError, FailureType } from '../common/failures';
import { isLoopbackHost } from '../temporal/transport';

/** A CSI endpoint in the conventional forms: unix:///abs/path.sock, unix:/abs/path.sock or tcp://host:port. */
export interface Endpoint {
  /** The address grpc-js binds or dials. */
  address: string;
  socketPath?: string;
}

export function parseEndpoint(endpoint: string): Endpoint {
  const unix = /^unix:(?:\/\/)?(\/.+)$/.exec(endpoint);
  if (unix?.[1]) return { address: `unix://${unix[1]}`, socketPath: unix[1] };
  const tcp = /^tcp:\/\/([^/]+:\d+)$/.exec(endpoint);
  if (tcp?.[1]) return { address: tcp[1] };
  throw new DriverError(
    FailureType.InvalidArgument,
    `endpoint "${endpoint}" is not unix:///absolute/path.sock or tcp://host:port`,
  );
}

/**
 * A CSI service has no authentication: the Node service mounts volumes wherever it is told, so it listens on a
 * unix socket or on loopback TCP, never where another host can reach it.
 */
export function assertLocalEndpoint(endpoint: string, service: string): void {
  const { address, socketPath } = parseEndpoint(endpoint);
  if (socketPath) return;
  const host = /^\[?([^\]]*?)\]?:\d+$/.exec(address)?.[1] ?? '';
  if (isLoopbackHost(host)) return;
  throw new DriverError(
    FailureType.InvalidArgument,
    `--endpoint ${endpoint} would serve ${service} beyond this host, without authentication: use ` +
      'unix:///path/csi.sock, or tcp://127.0.0.1:PORT (or [::1]) for tools on this host',
  );
}

/** A socket left by a killed process would make bind fail; remove it, but never a regular file. */
export function removeStaleSocket(socketPath: string): void {
  try {
    if (fs.lstatSync(socketPath).isSocket()) fs.unlinkSync(socketPath);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
}
