import type { Registry } from 'prom-client';
import type { StorageBackend } from '../storage/backend';
import { registerPoolGauges } from './pool-gauges';

/** The node's own view of its pool, read from the pool at scrape time. */
export function registerNodeMetrics(registry: Registry, backend: StorageBackend, nodeId: string): void {
  registerPoolGauges(registry, async () => [{ nodeId, ...(await backend.status()) }]);
}
