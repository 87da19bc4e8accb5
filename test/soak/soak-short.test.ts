import { runSoakForTest } from './run-soak';

/**
 * The short soak (docs/soak.md): every fault kind once, a few hundred operations, then the leak audit. It runs the
 * compiled harness as its own process (it starts its own Temporal server), so a failure prints the whole report.
 * DURABLE_CSI_SOAK_SEED replays a given seed; DURABLE_CSI_SOAK_ARGS adds options.
 */
const TIMEOUT_MS = 15 * 60_000;

describe('soak (short run)', () => {
  it(
    'loses, leaks and duplicates no volume or snapshot through rollouts, crashes, a Temporal restart and a version-skew upgrade',
    () => {
      const args = ['--ops', '200', '--long-down', '35s', '--long-outage', '65s'];
      const report = runSoakForTest(args, 'soak-short-report.json', TIMEOUT_MS - 30_000);
      expect(report.problems).toEqual([]);
      expect(report.audit).toMatchObject({ leaked: [], lost: [], duplicated: [], torn: [], pending: [], frozen: [] });
      expect(report.audit?.snapshots).toMatchObject({ leaked: [], lost: [], duplicated: [], torn: [] });
      expect(report.audit?.restoresElsewhere).toEqual([]);
      // The mix made, restored and deleted snapshots (a soak with none would pass the audit trivially), and
      // delete-then-create used snapshot names again (issue 33).
      const { created, restored, deleted, recreates } = report.workload.snapshots;
      expect({ created: created > 0, restored: restored > 0, deleted: deleted > 0 }).toEqual({
        created: true,
        restored: true,
        deleted: true,
      });
      if (report.options.faults.includes('delete-then-create')) expect(recreates).toBeGreaterThan(0);
      // Group snapshots (issue 37): made, asked for and deleted, under the same audit (members are snapshot copies).
      const groups = report.workload.groups;
      expect({
        created: groups.created > 0,
        deleted: groups.deleted > 0,
        got: groups.got + groups.notFound > 0,
      }).toEqual({
        created: true,
        deleted: true,
        got: true,
      });
      // Root (CI, this machine) runs freeze-then-kill too: `all` leaves it out only without root, and that must fail.
      expect(report.options.faults).toContain('freeze-then-kill');
      expect(new Set(report.faults.map((fault) => fault.kind))).toEqual(new Set(report.options.faults));
      expect(report.faults.every((fault) => fault.hit.total > 0)).toBe(true);
    },
    TIMEOUT_MS,
  );
});
