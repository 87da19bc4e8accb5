import { InternalConnectionLikeSymbol, type ConnectionLike, type Metadata } from '@temporalio/client';
import { NativeConnection, type Worker } from '@temporalio/worker';
import { connectionOptions, usesTls, type TemporalConfig } from './config';
import { followApiKeyFile } from './api-key-file';
import { followTlsFiles, readTlsMaterial, type TlsMaterial } from './tls-files';
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
  material?: TlsMaterial,
): Promise<NativeConnection> {
  const options = connectionOptions(config, material);
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

/** How long a replaced connection stays open for the calls still on it (a workflow result's long poll: up to 60 s). */
const REPLACED_CONNECTION_GRACE_MS = 70_000;

/**
 * The agents' connection when it must outlive its certificate: the TLS files (client certificate, key, CA) are
 * followed (temporal/tls-files.ts), and a changed set that checks whole makes a new NativeConnection, which replaces
 * the old one in every worker served (Worker's connection setter swaps the native client under a running worker) and
 * behind every Client made on this object (a Client cannot change its connection, so it is given this one, which
 * forwards each call to the current native connection). The old connection is closed once its calls had time to
 * end. Eager workflow start still works: the client's calls and the workers share the current native connection.
 */
export class FollowingConnection implements ConnectionLike {
  readonly [InternalConnectionLikeSymbol] = { supportsEagerStart: true };
  private readonly workers = new Set<Worker>();
  private readonly retiring = new Set<NativeConnection>();
  private stopFollowing: () => void = () => undefined;

  private constructor(
    private current: NativeConnection,
    private material: TlsMaterial,
  ) {}

  /** Connects (as connectTemporal) and, with a client certificate or a CA file, follows the TLS files. */
  static async connect(
    config: TemporalConfig,
    log: { info(message: string): void; error(message: string): void },
  ): Promise<FollowingConnection> {
    const material = readTlsMaterial(config);
    const onError = (message: string) => log.error(message);
    const following = new FollowingConnection(await connectTemporal(config, onError, material), material);
    if (config.tlsCert || config.tlsCa)
      following.stopFollowing = followTlsFiles(
        config,
        material,
        async (next) => {
          const connection = await connectTemporal(config, onError, next);
          try {
            following.replace(connection);
          } catch (error) {
            // Not taken (a worker refused the swap): closed, or every retry would leave one more open.
            await connection.close().catch(() => undefined);
            throw error;
          }
          following.material = next;
          log.info(
            `the Temporal TLS files changed: connected anew with them` +
              (next.notAfter ? ` (client certificate valid until ${next.notAfter.toISOString()})` : ''),
          );
        },
        onError,
      );
    return following;
  }

  /** The current native connection, for Worker.create; then `serve` the worker so that it follows replacements. */
  get native(): NativeConnection {
    return this.current;
  }

  /** The end of validity of the client certificate this connection presents (undefined without one). */
  get clientCertificateNotAfter(): Date | undefined {
    return this.material.notAfter;
  }

  serve(worker: Worker): void {
    this.workers.add(worker);
  }

  private replace(next: NativeConnection): void {
    const previous = this.current;
    for (const worker of this.workers) {
      const state = worker.getState();
      if (state === 'STOPPED' || state === 'FAILED') this.workers.delete(worker);
      else worker.connection = next;
    }
    this.current = next;
    this.retiring.add(previous);
    setTimeout(() => void this.retire(previous), REPLACED_CONNECTION_GRACE_MS).unref();
  }

  private async retire(connection: NativeConnection): Promise<void> {
    if (!this.retiring.delete(connection)) return;
    await connection.close().catch(() => undefined);
  }

  get workflowService() {
    return this.current.workflowService;
  }

  get operatorService() {
    return this.current.operatorService;
  }

  get plugins() {
    return this.current.plugins;
  }

  ensureConnected(): Promise<void> {
    return this.current.ensureConnected();
  }

  withDeadline<R>(deadline: number | Date, fn: () => Promise<R>): Promise<R> {
    return this.current.withDeadline(deadline, fn);
  }

  withMetadata<R>(metadata: Metadata, fn: () => Promise<R>): Promise<R> {
    return this.current.withMetadata(metadata, fn);
  }

  withAbortSignal<R>(abortSignal: AbortSignal, fn: () => Promise<R>): Promise<R> {
    return this.current.withAbortSignal(abortSignal, fn);
  }

  /** After the workers stopped: stops following and closes every connection. */
  async close(): Promise<void> {
    this.stopFollowing();
    await Promise.all([...this.retiring].map((connection) => this.retire(connection)));
    await this.current.close();
  }
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
