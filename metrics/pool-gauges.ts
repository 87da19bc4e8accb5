import { Gauge } from 'prom-client';
import type { Registry } from 'prom-client';

export interface PoolFigures {
  nodeId: string;
  capacityBytes: number;
  availableBytes: number;
  volumeCount: number;
  /** Only the node itself knows it; the registry does not carry it. */
  reservedBytes?: number;
}

const GAUGES = [
  ['durable_csi_pool_capacity_bytes', 'capacityBytes', 'Pool capacity'],
  ['durable_csi_pool_available_bytes', 'availableBytes', 'Unreserved pool space'],
  ['durable_csi_pool_reserved_bytes', 'reservedBytes', 'Space reserved by volumes and creates in progress'],
  ['durable_csi_pool_volumes', 'volumeCount', 'Volumes in the pool'],
] as const;

/**
 * The pool gauges, labelled by node, for the controller (every node, as last reported to the registry) and for
 * a node agent (its own pool). One read per scrape feeds all of them: prom-client collects them concurrently.
 */
export function registerPoolGauges(registry: Registry, read: () => Promise<PoolFigures[]>): void {
  let cached: { at: number; figures: Promise<PoolFigures[]> } | undefined;
  const figures = () => {
    if (!cached || Date.now() - cached.at > 1000) cached = { at: Date.now(), figures: read() };
    return cached.figures;
  };
  for (const [name, field, help] of GAUGES) {
    new Gauge({
      name,
      help,
      labelNames: ['node'],
      registers: [registry],
      async collect() {
        this.reset();
        for (const pool of await figures()) {
          const value = pool[field];
          if (value !== undefined) this.set({ node: pool.nodeId }, value);
        }
      },
    });
  }
}
