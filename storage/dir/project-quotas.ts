/**
 * Project quotas of the pool's filesystem, through xfsprogs' `xfs_quota` (XFS, and ext4 in its foreign mode `-f`).
 * Each quota-enforced dir volume is a project: its directory carries the project ID with the inherit flag (so
 * everything made inside joins it), and the project has a hard block limit of the volume's capacity.
 */
import { DriverError, FailureType } from '../../common/failures';
import { assertProjectQuotas } from './dir-quota';
import { runTool } from '../host/tools';
import { LAST_PROJECT_ID } from '../pool/records';

export interface ProjectQuotas {
  /** Refuses (FailedPrecondition, with what to do) unless the pool's filesystem enforces project quotas. */
  check(): Promise<void>;
  /** True when nothing (no inode, no block, no limit) is charged to the project on the pool's filesystem. */
  isFree(projectId: number): Promise<boolean>;
  /** Gives `dir` and everything in it the project ID, and the inherit flag. Idempotent. */
  assign(dir: string, projectId: number): Promise<void>;
  /** Sets the project's hard block limit. Idempotent. */
  setLimit(projectId: number, bytes: number): Promise<void>;
  /** Removes the project's limits. Idempotent. */
  clearLimit(projectId: number): Promise<void>;
}

/** Project IDs the driver chooses from: above those people number by hand, up to LAST_PROJECT_ID (signed tools). */
export const FIRST_PROJECT_ID = 1 << 24;

/** The first candidate for a volume, derived from its key (random hex) so that pools sharing a filesystem spread out. */
export function projectIdCandidate(key: string): number {
  const span = LAST_PROJECT_ID - FIRST_PROJECT_ID + 1;
  return FIRST_PROJECT_ID + (Number.parseInt(key.slice(0, 8), 16) % span);
}

export function nextProjectId(id: number): number {
  return id >= LAST_PROJECT_ID ? FIRST_PROJECT_ID : id + 1;
}

/**
 * A project ID for a new volume: the key's candidate or the next ones, skipping IDs the pool's records hold and
 * IDs the filesystem charges anything to (another pool, kubelet's own quotas, a person's).
 */
export async function chooseProjectId(quotas: ProjectQuotas, key: string, taken: Set<number>): Promise<number> {
  let id = projectIdCandidate(key);
  for (let tries = 0; tries < 64; tries++, id = nextProjectId(id)) {
    if (!taken.has(id) && (await quotas.isFree(id))) return id;
  }
  throw new DriverError(FailureType.Internal, `no free project ID near ${projectIdCandidate(key)} for volume ${key}`);
}

/** xfs_quota splits its command line on white space: a volume's directory must not hold any. */
function assertToolPath(dir: string): void {
  if (/[\s'"\\]/.test(dir)) {
    throw new DriverError(
      FailureType.FailedPrecondition,
      `--dir-quota=project needs a pool path without white space, quotes or backslashes: ${JSON.stringify(dir)}`,
    );
  }
}

/** The xfs_quota commands, run on the filesystem holding the pool. */
export class XfsProjectQuotas implements ProjectQuotas {
  private mountPoint: string | undefined;

  constructor(private readonly pool: string) {}

  async check(): Promise<void> {
    assertToolPath(this.pool);
    this.mountPoint = (await assertProjectQuotas(this.pool)).mountPoint;
    await runTool('xfs_quota', ['-V']);
  }

  async isFree(projectId: number): Promise<boolean> {
    // `quota` prints nothing for a project with no usage and no limits (-N: no header).
    return (await this.run(`quota -p -N -b -i ${projectId}`)).trim() === '';
  }

  async assign(dir: string, projectId: number): Promise<void> {
    assertToolPath(dir);
    await this.run(`project -s -p ${dir} ${projectId}`);
  }

  async setLimit(projectId: number, bytes: number): Promise<void> {
    await this.run(`limit -p bhard=${bytes} ${projectId}`);
  }

  async clearLimit(projectId: number): Promise<void> {
    await this.run(`limit -p bsoft=0 bhard=0 isoft=0 ihard=0 ${projectId}`);
  }

  /**
   * One command, expert and foreign mode (ext4), with empty projects files so the host's /etc/projects and
   * /etc/projid cannot add paths or names. xfs_quota exits 0 on many failures: anything on stderr fails.
   */
  private async run(command: string): Promise<string> {
    this.mountPoint ??= (await assertProjectQuotas(this.pool)).mountPoint;
    const args = ['-x', '-f', '-D', '/dev/null', '-P', '/dev/null', '-c', command, this.mountPoint];
    return runTool('xfs_quota', args, { stderrFails: true });
  }
}
