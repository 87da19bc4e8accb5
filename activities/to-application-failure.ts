import { ApplicationFailure } from '@temporalio/activity';
import { DriverError, NON_RETRYABLE_TYPES } from '../common/failures';

/**
 * Runs an activity body and turns a DriverError into an ApplicationFailure of the same type, so the type
 * survives the trip through Temporal to csi/errors.ts. Other errors pass through and are retried.
 */
export async function withFailureTypes<T>(body: () => Promise<T>): Promise<T> {
  try {
    return await body();
  } catch (error) {
    if (error instanceof DriverError) {
      throw ApplicationFailure.create({
        type: error.type,
        message: error.message,
        nonRetryable: NON_RETRYABLE_TYPES.includes(error.type),
      });
    }
    throw error;
  }
}
