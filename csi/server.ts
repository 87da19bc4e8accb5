import * as grpc from '@grpc/grpc-js';
import fs from 'node:fs';
import path from 'node:path';
import type { Logger } from '../common/logger';
import type { ProcessMetrics } from '../metrics/registry';
import { parseEndpoint, removeStaleSocket } from './endpoint';
import { toGrpcStatus } from './errors';
import { CSI_PACKAGE, csiPackage, type CsiMethodDefinition } from './proto';
import { redactSecrets } from './redact';

/** A CSI service written as plain async functions; the server adds transport, logging and error mapping. */
export type AsyncService = Record<
  string,
  (request: never, call: grpc.ServerUnaryCall<unknown, unknown>) => Promise<unknown>
>;

export interface CsiServices {
  identity: AsyncService;
  controller?: AsyncService;
  /** The GroupController (csi/group-controller-service.ts): served by a controller with --snapshots. */
  groupController?: AsyncService;
  node?: AsyncService;
}

export interface RunningServer {
  address: string;
  close(): Promise<void>;
}

/** Serves the given CSI services on one endpoint. Methods a service leaves out answer UNIMPLEMENTED. */
export async function serveCsi(
  endpoint: string,
  services: CsiServices,
  logger: Logger,
  metrics?: ProcessMetrics,
): Promise<RunningServer> {
  const csi = csiPackage();
  const server = new grpc.Server();
  const add = (definition: grpc.ServiceDefinition, service: AsyncService): void =>
    server.addService(definition, wrapService(definition as unknown as RequestTypes, service, logger, metrics));
  add(csi.Identity.service, services.identity);
  if (services.controller) add(csi.Controller.service, services.controller);
  if (services.groupController) add(csi.GroupController.service, services.groupController);
  if (services.node) add(csi.Node.service, services.node);

  const { address, socketPath } = parseEndpoint(endpoint);
  if (socketPath) {
    fs.mkdirSync(path.dirname(socketPath), { recursive: true });
    removeStaleSocket(socketPath);
  }
  await new Promise<number>((resolve, reject) =>
    server.bindAsync(address, grpc.ServerCredentials.createInsecure(), (error, port) =>
      error ? reject(error) : resolve(port),
    ),
  );
  logger.info({ endpoint }, 'CSI server listening');
  return {
    address,
    close: () =>
      new Promise<void>((resolve) => {
        server.tryShutdown(() => resolve());
        setTimeout(() => server.forceShutdown(), 5000).unref();
      }),
  };
}

/** What the wrapper reads of a service definition: each method's request message (csi/proto.ts). */
type RequestTypes = Record<string, Pick<CsiMethodDefinition, 'requestTypeName'> | undefined>;

/** The one wrapper around every call: redacted request logging, duration, and the single error-to-code map. */

function wrapService(
  definition: RequestTypes,
  service: AsyncService,
  logger: Logger,
  metrics?: ProcessMetrics,
): grpc.UntypedServiceImplementation {
  const wrapped: grpc.UntypedServiceImplementation = {};
  for (const [method, handler] of Object.entries(service)) {
    // The request's message type says which of its fields redactSecrets masks. A method the definition lacks is
    // never called.
    const requestName = definition[method]?.requestTypeName;
    if (!requestName) continue;
    const redacted = (request: unknown): unknown => redactSecrets(request, `${CSI_PACKAGE}.${requestName}`);
    wrapped[method] = (call: grpc.ServerUnaryCall<unknown, unknown>, callback: grpc.sendUnaryData<unknown>) => {
      const started = process.hrtime.bigint();
      const log = logger.child({ method, ...callSubject(call.request) });
      // The redacted copy is made only for a line that is written: at the deployed level (info) it is not.
      if (log.isLevelEnabled('debug')) log.debug({ request: redacted(call.request) }, 'call');
      handler(call.request as never, call).then(
        (response) => {
          observe(metrics, method, 'OK', started);
          log.info({ ms: elapsedMs(started) }, 'ok');
          callback(null, response);
        },
        (error: unknown) => {
          const { code, message, unexpected } = toGrpcStatus(error);
          observe(metrics, method, grpc.status[code], started);
          const fields = { ms: elapsedMs(started), code: grpc.status[code], message };
          if (unexpected) log.error({ ...fields, err: error, request: redacted(call.request) }, 'failed');
          else log.info(fields, 'refused or pending');
          callback({ code, details: message });
        },
      );
    };
  }
  return wrapped;
}

/** Request fields that say what a call is about, and nothing else (never secrets, never a whole parameter map). */
const SUBJECT_FIELDS = ['volume_id', 'snapshot_id', 'source_volume_id', 'group_snapshot_id', 'name'] as const;
const CLAIM_PARAMETERS = {
  pv: 'csi.storage.k8s.io/pv/name',
  pvcNamespace: 'csi.storage.k8s.io/pvc/namespace',
  pvc: 'csi.storage.k8s.io/pvc/name',
  snapshotNamespace: 'csi.storage.k8s.io/volumesnapshot/namespace',
  snapshot: 'csi.storage.k8s.io/volumesnapshot/name',
} as const;

/**
 * The volume or snapshot a call is about and, when the CO said (external-provisioner's and external-snapshotter's
 * --extra-create-metadata), its PV and PVC or VolumeSnapshot: on every call's line, so that one grep for a claim or
 * an ID finds its calls and their outcomes at the deployed level (info).
 */
export function callSubject(request: unknown): Record<string, string> {
  if (typeof request !== 'object' || request === null) return {};
  const fields = request as Record<string, unknown>;
  const subject: Record<string, string> = {};
  for (const field of SUBJECT_FIELDS) {
    const value = fields[field];
    if (typeof value === 'string' && value !== '') subject[field] = value;
  }
  const parameters = fields.parameters;
  if (typeof parameters === 'object' && parameters !== null) {
    const given = parameters as Record<string, unknown>;
    const text = (key: string) =>
      typeof given[key] === 'string' && given[key] !== '' ? (given[key] as string) : undefined;
    const pv = text(CLAIM_PARAMETERS.pv);
    if (pv) subject.pv = pv;
    const pvc = text(CLAIM_PARAMETERS.pvc);
    if (pvc) subject.pvc = `${text(CLAIM_PARAMETERS.pvcNamespace) ?? '?'}/${pvc}`;
    const snapshot = text(CLAIM_PARAMETERS.snapshot);
    if (snapshot) subject.volumesnapshot = `${text(CLAIM_PARAMETERS.snapshotNamespace) ?? '?'}/${snapshot}`;
  }
  return subject;
}

function observe(metrics: ProcessMetrics | undefined, method: string, code: string, started: bigint): void {
  metrics?.csiCalls.inc({ method, code });
  metrics?.csiCallSeconds.observe({ method, code }, elapsedMs(started) / 1000);
}

function elapsedMs(started: bigint): number {
  return Number((process.hrtime.bigint() - started) / 1_000_000n);
}
