/**
 * The closed set of failure types used everywhere: storage throws DriverError, activities turn it into an
 * ApplicationFailure of the same type, and csi/errors.ts maps the type to a gRPC code in one place.
 * No Node built-ins here: workflow code imports this file.
 */
export const FailureType = {
  InvalidArgument: 'InvalidArgument',
  AlreadyExists: 'AlreadyExists',
  NotFound: 'NotFound',
  ResourceExhausted: 'ResourceExhausted',
  OutOfRange: 'OutOfRange',
  Aborted: 'Aborted',
  FailedPrecondition: 'FailedPrecondition',
  Unavailable: 'Unavailable',
  Internal: 'Internal',
} as const;

export type FailureType = (typeof FailureType)[keyof typeof FailureType];

/** Failures a retry cannot fix: the caller must change the request or the world must change first. */
export const NON_RETRYABLE_TYPES: readonly FailureType[] = [
  FailureType.InvalidArgument,
  FailureType.AlreadyExists,
  FailureType.NotFound,
  FailureType.ResourceExhausted,
  FailureType.OutOfRange,
  FailureType.FailedPrecondition,
];

export class DriverError extends Error {
  constructor(
    readonly type: FailureType,
    message: string,
  ) {
    super(message);
    this.name = 'DriverError';
  }
}

export function isFailureType(value: unknown): value is FailureType {
  return typeof value === 'string' && Object.values<string>(FailureType).includes(value);
}
