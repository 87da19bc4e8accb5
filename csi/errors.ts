import { status } from '@grpc/grpc-js';
import { isGrpcServiceError, WorkflowFailedError } from '@temporalio/client';
import { ApplicationFailure, CancelledFailure, NamespaceNotFoundError, TerminatedFailure } from '@temporalio/common';
import { DriverError, FailureType, isFailureType } from '../common/failures';

/** The single mapping from failures of any layer to the gRPC status the CO sees. */
export interface GrpcStatus {
  code: status;
  message: string;
  /** True when the cause is unexpected and its stack belongs in the log. */
  unexpected: boolean;
}

const CODES: Record<FailureType, status> = {
  [FailureType.InvalidArgument]: status.INVALID_ARGUMENT,
  [FailureType.AlreadyExists]: status.ALREADY_EXISTS,
  [FailureType.NotFound]: status.NOT_FOUND,
  [FailureType.ResourceExhausted]: status.RESOURCE_EXHAUSTED,
  [FailureType.OutOfRange]: status.OUT_OF_RANGE,
  [FailureType.Aborted]: status.ABORTED,
  [FailureType.FailedPrecondition]: status.FAILED_PRECONDITION,
  [FailureType.Unavailable]: status.UNAVAILABLE,
  [FailureType.Internal]: status.INTERNAL,
};

export function toGrpcStatus(error: unknown): GrpcStatus {
  if (error instanceof DriverError) return { code: CODES[error.type], message: error.message, unexpected: false };
  if (error instanceof WorkflowFailedError) return fromWorkflowFailure(error);
  if (error instanceof NamespaceNotFoundError) {
    // A server that is starting answers so until it has loaded its namespaces: retriable, like an outage.
    const message =
      `Temporal does not know the namespace "${error.namespace}" (a server still starting, or a wrong ` +
      '--temporal-namespace / TEMPORAL_NAMESPACE); retry';
    return { code: status.UNAVAILABLE, message, unexpected: false };
  }
  const answered = fromTemporalStatus(error);
  if (answered) return answered;
  if (error instanceof Error && /Failed to connect|TransportError|ECONNREFUSED|tcp connect error/.test(error.message)) {
    return { code: status.UNAVAILABLE, message: `Temporal is unreachable: ${messageOf(error)}`, unexpected: false };
  }
  return { code: status.INTERNAL, message: `internal error: ${messageOf(error)}`, unexpected: true };
}

/** Walks the cause chain (workflow -> activity -> application failure) to the typed failure at its root. */
function fromWorkflowFailure(error: WorkflowFailedError): GrpcStatus {
  for (let cause: unknown = error.cause; cause instanceof Error; cause = cause.cause) {
    if (cause instanceof ApplicationFailure && isFailureType(cause.type)) {
      return { code: CODES[cause.type], message: cause.message, unexpected: cause.type === FailureType.Internal };
    }
    if (cause instanceof TerminatedFailure || cause instanceof CancelledFailure) {
      return {
        code: status.ABORTED,
        message: `the operation was ended by an operator: ${cause.message}`,
        unexpected: false,
      };
    }
  }
  return { code: status.INTERNAL, message: `operation failed: ${messageOf(error.cause ?? error)}`, unexpected: true };
}

/**
 * A Temporal call that failed with a gRPC status. Through the native connection the error is itself the status,
 * usually wrapped by the SDK as the cause of its own ServiceError. Whatever the SDK itself retries is answered
 * with a retriable code: external-provisioner treats every code but CANCELLED, DEADLINE_EXCEEDED, UNAVAILABLE,
 * ABORTED and RESOURCE_EXHAUSTED as final (pkg/controller/controller.go, checkError), while the workflow this call
 * started or waited on may be running. A frontend rate limit (RESOURCE_EXHAUSTED) becomes UNAVAILABLE: passed on as
 * RESOURCE_EXHAUSTED it would read as "no room on this node" and make the CO reschedule the pod.
 */
function fromTemporalStatus(error: unknown): GrpcStatus | undefined {
  const grpcError = [error, error instanceof Error ? error.cause : undefined].find(isGrpcServiceError);
  if (!grpcError) return undefined;
  const what = `${status[grpcError.code] ?? grpcError.code}: ${grpcError.details || grpcError.message}`;
  // CANCELLED here is a dropped transport ("operation was canceled"), never our caller's cancellation.
  if (UNREACHABLE_CODES.has(grpcError.code)) {
    return { code: status.UNAVAILABLE, message: `Temporal is unreachable: ${messageOf(error)}`, unexpected: false };
  }
  if (grpcError.code === status.RESOURCE_EXHAUSTED) {
    const message = `Temporal throttled the request (${what}): its rate limits, not this driver's capacity; retry`;
    return { code: status.UNAVAILABLE, message, unexpected: false };
  }
  if (TRANSIENT_CODES.has(grpcError.code) || isTransientTransport(grpcError)) {
    // Unknown, data loss and transport resets deserve their stack in the log; ABORTED is a routine conflict.
    const unexpected = grpcError.code !== status.ABORTED;
    return { code: status.UNAVAILABLE, message: `Temporal could not serve the request (${what}); retry`, unexpected };
  }
  return undefined;
}

const UNREACHABLE_CODES = new Set<number>([status.UNAVAILABLE, status.DEADLINE_EXCEEDED, status.CANCELLED]);
/** The codes @temporalio/client's own retry interceptor retries (grpc-retry.ts), besides UNAVAILABLE. */
const TRANSIENT_CODES = new Set<number>([status.UNKNOWN, status.ABORTED, status.DATA_LOSS, status.OUT_OF_RANGE]);

/** INTERNAL that the SDK also retries: an HTTP/2 stream reset under the call, not a TLS or encoding problem. */
function isTransientTransport(error: { code: number; details: string }): boolean {
  if (error.code !== status.INTERNAL) return false;
  if (/RST_STREAM with code 0|Call ended without gRPC status/i.test(error.details)) return true;
  return /RST_STREAM with code 2/i.test(error.details) && !/SSL alert number/i.test(error.details);
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
