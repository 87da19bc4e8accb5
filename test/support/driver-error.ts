import { DriverError } from '../../common/failures';
import type { FailureType } from '../../common/failures';

/**
 * Asserts that a call fails with a DriverError of `type` (and, if given, a message matching `message`), and returns
 * that error: pass a function for a call that throws, or a promise for one that rejects.
 */
export function expectDriverError(fn: () => unknown, type: FailureType, message?: RegExp): DriverError;
export function expectDriverError(promise: Promise<unknown>, type: FailureType, message?: RegExp): Promise<DriverError>;
export function expectDriverError(
  call: (() => unknown) | Promise<unknown>,
  type: FailureType,
  message?: RegExp,
): DriverError | Promise<DriverError> {
  if (typeof call !== 'function') {
    return call.then(
      () => {
        throw new Error('expected the promise to reject, but it resolved');
      },
      (reason: unknown) => asDriverError(reason, type, message),
    );
  }
  try {
    call();
  } catch (error) {
    return asDriverError(error, type, message);
  }
  throw new Error('expected the call to throw, but it returned');
}

function asDriverError(error: unknown, type: FailureType, message?: RegExp): DriverError {
  expect(error).toBeInstanceOf(DriverError);
  const driverError = error as DriverError;
  expect(driverError.type).toBe(type);
  if (message) expect(driverError.message).toMatch(message);
  return driverError;
}
