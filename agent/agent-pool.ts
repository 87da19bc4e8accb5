import { DriverError, FailureType } from '../common/failures';
import type { Logger } from '../common/logger';
import type { OpenReport, StorageBackend } from '../storage/pool/backend';
import type { NewIdentity } from '../storage/pool/pool-layout';
import { filesystemRefusal, POOL_RECHECK_MS } from './pool-gate';

/**
 * The pool as the agent holds it. A pool that has an identity is opened at start, before Temporal is reached, so
 * kubelet's calls on its volumes are served at once; a pool without one is opened (and given one) only once the
 * pool gate has read the node's record (agent/pool-gate.ts). Until then the node's calls answer UNAVAILABLE
 * with the reason.
 */
export class AgentPool {
  private report: OpenReport | undefined;
  private waiting = 'the pool is not open yet';
  /** Set while the gate refuses the pool (its filesystem, or the identity there); the health RPCs report it. */
  private refusal: string | undefined;

  constructor(
    readonly backend: StorageBackend,
    private readonly logger: Logger,
  ) {}

  /**
   * At start, and again until its filesystem is fit: opens the pool if its filesystem is one the backend may run on
   * (agent/pool-gate.ts) and it has an identity; never makes one. Returns why not when the filesystem is refused.
   */
  async openIfIdentified(nodeId: string): Promise<string | undefined> {
    if (this.report) return undefined;
    const unfit = await filesystemRefusal(this.backend, POOL_RECHECK_MS / 1000);
    if (unfit !== undefined) {
      this.waiting = unfit;
      this.refusal = unfit;
      return unfit;
    }
    if (await this.backend.identity()) {
      await this.open({});
      return undefined;
    }
    const waiting =
      `the pool of node ${nodeId} has no identity yet (an empty directory, or its disk is not mounted): ` +
      `it gets one only after the agent has read the node's record in Temporal`;
    if (this.waiting !== waiting) this.logger.warn(waiting);
    this.waiting = waiting;
    return undefined;
  }

  /** Opens the pool (again, when the identity on disk is no longer the one open), making `fresh` if it has none. */
  async open(fresh: NewIdentity): Promise<OpenReport> {
    const onDisk = await this.backend.identity();
    if (this.report && onDisk?.poolId === this.report.poolId) return this.report;
    if (this.report) await this.backend.close();
    const report = await this.backend.open(fresh);
    const { poolId, created, reconciled, strays, repaired } = report;
    this.logger.info({ poolId, created, replaces: fresh.replaces, reconciled }, 'pool open');
    if (strays.length > 0) this.logger.warn({ strays }, 'pool holds entries no record explains');
    if (repaired.length > 0) this.logger.warn({ repaired }, 'staged volumes and loop devices repaired at open');
    this.report = report;
    this.refusal = undefined;
    return report;
  }

  /** The gate refused the pool: the node's calls show why until it is open (the health RPCs report it too). */
  refuse(reason: string): void {
    this.waiting = reason;
    this.refusal = reason;
  }

  /** Why the gate refuses the pool; undefined while it is open or not decided yet. */
  refused(): string | undefined {
    return this.report ? undefined : this.refusal;
  }

  /** The open pool's identity; UNAVAILABLE (retried by kubelet) with the reason while it is not open. */
  poolId(): string {
    if (!this.report) throw new DriverError(FailureType.Unavailable, this.waiting);
    return this.report.poolId;
  }

  async close(): Promise<void> {
    this.report = undefined;
    await this.backend.close();
  }
}
