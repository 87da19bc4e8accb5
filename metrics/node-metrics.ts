import type { Registry } from 'prom-client';
import { DriverError, FailureType } from '../common/failures';
import type { StorageBackend } from '../storage/pool/backend';
import { registerPoolGauges } from './pool-gauges';

/** The node's own view of its pool, read from the pool at scrape time; nothing while the pool is not open yet. */
export function registerNodeMetrics(registry: Registry, backend: StorageBackend, nodeId: string): void {
  registerPoolGauges(registry, async () => {
    try {
      return [{ nodeId, ...(await backend.status()) }];
    } catch (error) {
      // The agent waits for Temporal or for an operator's decision before it opens an unidentified pool.
      if (error instanceof DriverError && error.type === FailureType.FailedPrecondition) return [];
      throw error;
    }
  });
}
