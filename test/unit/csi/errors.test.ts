import { status } from '@grpc/grpc-js';
import { Metadata } from '@grpc/grpc-js';
import { ServiceError, WorkflowFailedError } from '@temporalio/client';
import {
  ActivityFailure,
  ApplicationFailure,
  CancelledFailure,
  NamespaceNotFoundError,
  TerminatedFailure,
} from '@temporalio/common';
import { DriverError, FailureType } from '../../../common/failures';
import { toGrpcStatus } from '../../../csi/errors';

/** What a workflow that failed in an activity with an ApplicationFailure looks like to the client. */
function workflowFailedIn(activityCause: Error): WorkflowFailedError {
  const activity = new ActivityFailure(
    'activity failed',
    'createVolume',
    '1',
    'NON_RETRYABLE_FAILURE',
    'agent',
    activityCause,
  );
  return new WorkflowFailedError('Workflow execution failed', activity, 'NON_RETRYABLE_FAILURE');
}

/** Shaped like the errors @grpc/grpc-js rejects calls with: an Error with a numeric code, details and metadata. */
function grpcServiceError(code: status, details: string): Error {
  return Object.assign(new Error(`${code} ${status[code]}: ${details}`), { code, details, metadata: new Metadata() });
}

describe('toGrpcStatus', () => {
  describe('a DriverError', () => {
    it.each<[FailureType, status]>([
      [FailureType.InvalidArgument, status.INVALID_ARGUMENT],
      [FailureType.AlreadyExists, status.ALREADY_EXISTS],
      [FailureType.NotFound, status.NOT_FOUND],
      [FailureType.ResourceExhausted, status.RESOURCE_EXHAUSTED],
      [FailureType.OutOfRange, status.OUT_OF_RANGE],
      [FailureType.Aborted, status.ABORTED],
      [FailureType.FailedPrecondition, status.FAILED_PRECONDITION],
      [FailureType.Unavailable, status.UNAVAILABLE],
      [FailureType.Internal, status.INTERNAL],
    ])('of type %s maps to code %d with its own message', (type, code) => {
      expect(toGrpcStatus(new DriverError(type, `failed with ${type}`))).toEqual({
        code,
        message: `failed with ${type}`,
        unexpected: false,
      });
    });

    it('covers every FailureType', () => {
      const mapped = Object.values(FailureType).map((type) => toGrpcStatus(new DriverError(type, 'x')).code);
      expect(new Set(mapped).size).toBe(Object.values(FailureType).length);
    });
  });

  describe('a WorkflowFailedError', () => {
    it('maps an activity ApplicationFailure of type ResourceExhausted to RESOURCE_EXHAUSTED with its message', () => {
      const cause = ApplicationFailure.create({
        type: 'ResourceExhausted',
        message: 'no node has 10Gi free',
        nonRetryable: true,
      });
      expect(toGrpcStatus(workflowFailedIn(cause))).toEqual({
        code: status.RESOURCE_EXHAUSTED,
        message: 'no node has 10Gi free',
        unexpected: false,
      });
    });

    it('maps an ApplicationFailure thrown by the workflow itself', () => {
      const cause = ApplicationFailure.create({ type: 'NotFound', message: 'node gone', nonRetryable: true });
      const error = new WorkflowFailedError('Workflow execution failed', cause, 'NON_RETRYABLE_FAILURE');
      expect(toGrpcStatus(error)).toEqual({ code: status.NOT_FOUND, message: 'node gone', unexpected: false });
    });

    it('marks an Internal ApplicationFailure as unexpected', () => {
      const cause = ApplicationFailure.create({ type: 'Internal', message: 'journal corrupt' });
      expect(toGrpcStatus(workflowFailedIn(cause))).toEqual({
        code: status.INTERNAL,
        message: 'journal corrupt',
        unexpected: true,
      });
    });

    it('looks past an ApplicationFailure of a foreign type to a typed one deeper in the chain', () => {
      const typed = ApplicationFailure.create({ type: 'AlreadyExists', message: 'name taken' });
      const foreign = ApplicationFailure.create({ type: 'TypeError', message: 'wrapped', cause: typed });
      expect(toGrpcStatus(workflowFailedIn(foreign))).toMatchObject({
        code: status.ALREADY_EXISTS,
        message: 'name taken',
      });
    });

    it('maps a TerminatedFailure cause to ABORTED', () => {
      const error = new WorkflowFailedError(
        'terminated',
        new TerminatedFailure('by operator'),
        'NON_RETRYABLE_FAILURE',
      );
      const result = toGrpcStatus(error);
      expect(result.code).toBe(status.ABORTED);
      expect(result.unexpected).toBe(false);
      expect(result.message).toContain('by operator');
    });

    it('maps a CancelledFailure cause to ABORTED', () => {
      const error = new WorkflowFailedError('cancelled', new CancelledFailure('cancel requested'), 'CANCEL_REQUESTED');
      expect(toGrpcStatus(error)).toMatchObject({ code: status.ABORTED, unexpected: false });
    });

    it('maps an untyped failure to INTERNAL, unexpected', () => {
      const cause = ApplicationFailure.create({ type: 'Error', message: 'disk on fire' });
      const result = toGrpcStatus(workflowFailedIn(cause));
      expect(result.code).toBe(status.INTERNAL);
      expect(result.unexpected).toBe(true);
      expect(result.message).toMatch(/^operation failed: /);
    });

    it('maps a failure without a cause to INTERNAL with the error message', () => {
      const result = toGrpcStatus(new WorkflowFailedError('no cause', undefined, 'NON_RETRYABLE_FAILURE'));
      expect(result).toEqual({ code: status.INTERNAL, message: 'operation failed: no cause', unexpected: true });
    });
  });

  describe('Temporal being unreachable', () => {
    it('maps a gRPC ServiceError with code UNAVAILABLE to UNAVAILABLE', () => {
      const result = toGrpcStatus(grpcServiceError(status.UNAVAILABLE, 'No connection established'));
      expect(result.code).toBe(status.UNAVAILABLE);
      expect(result.unexpected).toBe(false);
      expect(result.message).toMatch(/^Temporal is unreachable: .*No connection established/);
    });

    it('maps DEADLINE_EXCEEDED to UNAVAILABLE', () => {
      expect(toGrpcStatus(grpcServiceError(status.DEADLINE_EXCEEDED, 'deadline')).code).toBe(status.UNAVAILABLE);
    });

    it('looks inside a Temporal ServiceError for the gRPC error', () => {
      const error = new ServiceError('Failed to start workflow', {
        cause: grpcServiceError(status.UNAVAILABLE, 'connection refused'),
      });
      expect(toGrpcStatus(error)).toMatchObject({ code: status.UNAVAILABLE, unexpected: false });
    });

    it('maps the native connection error, which is itself a ServiceError with a gRPC code, to UNAVAILABLE', () => {
      // As the agents' NativeConnection rejects a call while the frontend is down (seen in the prod soak).
      const native = Object.assign(new ServiceError('tcp connect error'), {
        code: status.UNAVAILABLE,
        details: '',
        metadata: {},
      });
      expect(toGrpcStatus(native)).toMatchObject({ code: status.UNAVAILABLE, unexpected: false });
    });

    it('maps a transport dropped under a call (CANCELLED from Temporal) to UNAVAILABLE', () => {
      const error = new ServiceError('Failed to start Workflow', {
        cause: grpcServiceError(status.CANCELLED, 'operation was canceled'),
      });
      expect(toGrpcStatus(error)).toMatchObject({ code: status.UNAVAILABLE, unexpected: false });
    });

    it('maps a connection failure message to UNAVAILABLE', () => {
      expect(toGrpcStatus(new Error('connect ECONNREFUSED 127.0.0.1:7233')).code).toBe(status.UNAVAILABLE);
      expect(toGrpcStatus(new Error('Failed to connect before the deadline')).code).toBe(status.UNAVAILABLE);
    });

    it('does not treat other gRPC codes as unreachable', () => {
      const result = toGrpcStatus(grpcServiceError(status.PERMISSION_DENIED, 'nope'));
      expect(result.code).toBe(status.INTERNAL);
      expect(result.unexpected).toBe(true);
    });

    it('requires details and metadata to call an error a gRPC error', () => {
      const bare = Object.assign(new Error('code only'), { code: status.UNAVAILABLE });
      expect(toGrpcStatus(bare).code).toBe(status.INTERNAL);
    });
  });

  describe('Temporal answering with a retriable status', () => {
    // external-provisioner treats only CANCELLED, DEADLINE_EXCEEDED, UNAVAILABLE, ABORTED (and RESOURCE_EXHAUSTED)
    // as "may still be in progress"; anything else is final although the workflow may already run.
    it('maps a frontend rate limit (RESOURCE_EXHAUSTED) to UNAVAILABLE saying Temporal throttled, not to a reschedule', () => {
      const throttled = new ServiceError('Failed to start Workflow', {
        cause: grpcServiceError(status.RESOURCE_EXHAUSTED, 'namespace rate limit exceeded'),
      });
      expect(toGrpcStatus(throttled)).toEqual({
        code: status.UNAVAILABLE,
        message: expect.stringMatching(
          /^Temporal throttled the request \(RESOURCE_EXHAUSTED: namespace rate limit exceeded\)/,
        ),
        unexpected: false,
      });
    });

    it('maps the native connection rate-limit error, itself a gRPC-shaped ServiceError, to UNAVAILABLE', () => {
      const native = Object.assign(new ServiceError('Status { code: ResourceExhausted }'), {
        code: status.RESOURCE_EXHAUSTED,
        details: 'namespace rate limit exceeded',
        metadata: new Metadata(),
      });
      expect(toGrpcStatus(new ServiceError('Failed to start Workflow', { cause: native }))).toMatchObject({
        code: status.UNAVAILABLE,
        message: expect.stringContaining('Temporal throttled'),
      });
      expect(toGrpcStatus(native).code).toBe(status.UNAVAILABLE);
    });

    it.each([status.ABORTED, status.UNKNOWN, status.DATA_LOSS, status.OUT_OF_RANGE])(
      'maps code %d, which the SDK itself retries, to UNAVAILABLE naming the code',
      (code) => {
        const error = new ServiceError('Failed to start Workflow', { cause: grpcServiceError(code, 'transient') });
        const result = toGrpcStatus(error);
        expect(result.code).toBe(status.UNAVAILABLE);
        expect(result.message).toContain(`${status[code]}: transient`);
      },
    );

    it('maps a transient transport INTERNAL (RST_STREAM) to UNAVAILABLE, another INTERNAL stays INTERNAL', () => {
      const reset = grpcServiceError(
        status.INTERNAL,
        'Received RST_STREAM with code 2 triggered by internal client error',
      );
      expect(toGrpcStatus(new ServiceError('Failed', { cause: reset })).code).toBe(status.UNAVAILABLE);
      const bug = grpcServiceError(status.INTERNAL, 'proto: cannot parse invalid wire-format data');
      expect(toGrpcStatus(new ServiceError('Failed', { cause: bug }))).toMatchObject({
        code: status.INTERNAL,
        unexpected: true,
      });
    });

    it('maps an unknown namespace (a server still loading its namespaces, or a wrong --temporal-namespace) to UNAVAILABLE', () => {
      // The SDK turns the server's NamespaceNotFoundFailure detail into its own error, without a gRPC code.
      expect(toGrpcStatus(new NamespaceNotFoundError('default'))).toEqual({
        code: status.UNAVAILABLE,
        message: expect.stringMatching(/^Temporal does not know the namespace "default" .*--temporal-namespace.*retry/),
        unexpected: false,
      });
    });

    it('keeps a definite refusal from Temporal (PERMISSION_DENIED inside a ServiceError) INTERNAL', () => {
      const denied = new ServiceError('Failed', { cause: grpcServiceError(status.PERMISSION_DENIED, 'no access') });
      expect(toGrpcStatus(denied)).toMatchObject({ code: status.INTERNAL, unexpected: true });
    });
  });

  describe('anything else', () => {
    it('maps an unknown Error to INTERNAL, unexpected, with its message', () => {
      expect(toGrpcStatus(new TypeError('x is undefined'))).toEqual({
        code: status.INTERNAL,
        message: 'internal error: x is undefined',
        unexpected: true,
      });
    });

    it('maps a thrown non-Error to INTERNAL', () => {
      expect(toGrpcStatus('boom')).toEqual({
        code: status.INTERNAL,
        message: 'internal error: boom',
        unexpected: true,
      });
    });
  });
});
