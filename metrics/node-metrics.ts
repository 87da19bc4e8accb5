import { Gauge } from 'prom-client';
import type { Registry } from 'prom-client';
import type { StorageBackend } from '../storage/backend';

/** The node's own view of its pool, read from the pool at scrape time. */
export function registerNodeMetrics(registry: Registry, backend: StorageBackend, nodeId: string): void {
  for (const [name, field, help] of [
    ['durable_csi_pool_capacity_bytes', 'capacityBytes', 'Pool capacity'],
    ['durable_csi_pool_available_bytes', 'availableBytes', 'Unreserved pool space'],
    ['durable_csi_pool_reserved_bytes', 'reservedBytes', 'Space reserved by volumes and creates in progress'],
    ['durable_csi_pool_volumes', 'volumeCount', 'Volumes in the pool'],
  ] as const) {
    new Gauge({
      name,
      help,
      labelNames: ['node'],
      registers: [registry],
      async collect() {
        const status = await backend.status();
        this.set({ node: nodeId }, status[field]);
      },
    });
  }
}
