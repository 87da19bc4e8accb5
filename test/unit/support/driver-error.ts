import { DriverError } from '../../../common/failures';
import type { FailureType } from '../../../common/failures';

/** Runs `fn` and returns what it threw; fails the test if it returned normally. */
export function thrownBy(fn: () => unknown): unknown {
  try {
    fn();
  } catch (error) {
    return error;
  }
  throw new Error('expected the call to throw, but it returned');
}

/** Asserts that `fn` throws a DriverError of `type` (and, if given, a message matching `message`). */
export function expectDriverError(fn: () => unknown, type: FailureType, message?: RegExp): DriverError {
  const error = thrownBy(fn);
  expect(error).toBeInstanceOf(DriverError);
  const driverError = error as DriverError;
  expect(driverError.type).toBe(type);
  if (message) expect(driverError.message).toMatch(message);
  return driverError;
}
