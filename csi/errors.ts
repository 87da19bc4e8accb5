import { status } from '@grpc/grpc-js';
import { isGrpcServiceError, WorkflowFailedError } from '@temporalio/client';
import { ApplicationFailure, TerminatedFailure, CancelledFailure } from '@temporalio/common';
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
  if (isTemporalUnreachable(error)) {
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
 * Temporal calls that could not reach the server, or lost it on the way: retriable. Through the native connection
 * (agents) the error is itself the gRPC status, often wrapped by the SDK as the cause of its own ServiceError;
 * CANCELLED there is a dropped transport ("operation was canceled"), never our caller's cancellation.
 */
function isTemporalUnreachable(error: unknown): boolean {
  for (const candidate of [error, error instanceof Error ? error.cause : undefined]) {
    if (isGrpcServiceError(candidate) && UNREACHABLE_CODES.has(candidate.code)) return true;
  }
  return (
    error instanceof Error && /Failed to connect|TransportError|ECONNREFUSED|tcp connect error/.test(error.message)
  );
}

const UNREACHABLE_CODES = new Set<number>([status.UNAVAILABLE, status.DEADLINE_EXCEEDED, status.CANCELLED]);

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
