import type { PhaseUsage, ProcessWatch } from './process-usage';
import { scrapeCounters, serverWork, type Counters, type ServerWork } from './server-metrics';

/** What a phase of the benchmark cost: the server's work and each process group's CPU and peak memory. */
export interface PhaseCost {
  /** Operations the phase made (calls, whether they succeeded or not): the divisor of per-operation figures. */
  operations: number;
  wallMs: number;
  server: ServerWork | undefined;
  usage: PhaseUsage;
}

interface Started {
  at: number;
  counters: Counters | undefined;
  cpu: ReturnType<ProcessWatch['begin']>;
}

/**
 * The server publishes its counters about once a second: a scrape reflects the work only after that. Measured: 10
 * StartWorkflowExecution calls appeared 0.6 to 0.9 s after they were answered.
 */
const PUBLISH_LAG_MS = 1_300;

/** Brackets a phase: begin() before its first call, end() after its last answer. */
export class CostMeter {
  private lastEnd: { at: number; counters: Counters | undefined } | undefined;

  constructor(
    readonly watch: ProcessWatch,
    private readonly metricsUrl: string | undefined,
  ) {}

  async begin(): Promise<Started> {
    // An end() just before already waited for everything earlier to be published.
    const fresh = this.lastEnd && performance.now() - this.lastEnd.at < 100 ? this.lastEnd.counters : undefined;
    const counters = fresh ?? (await this.scrape());
    // After the scrape, so that the scrape's own CPU is not counted.
    return { at: performance.now(), counters, cpu: this.watch.begin() };
  }

  async end(started: Started, operations: number): Promise<PhaseCost> {
    const wallMs = performance.now() - started.at;
    const usage = this.watch.end(started.cpu);
    const counters = await this.scrape();
    this.lastEnd = { at: performance.now(), counters };
    const server = started.counters && counters ? serverWork(started.counters, counters) : undefined;
    return { operations, wallMs, server, usage };
  }

  private async scrape(): Promise<Counters | undefined> {
    if (!this.metricsUrl) return undefined;
    await new Promise((resolve) => setTimeout(resolve, PUBLISH_LAG_MS));
    return scrapeCounters(this.metricsUrl);
  }
}
