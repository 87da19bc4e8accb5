import { runSoakForTest } from '../soak/run-soak';

/**
 * A short soak against its own production-style Temporal (docs/temporal-cluster.md): the faults only that server can
 * show (history killed and restarted, matching killed and restarted, PostgreSQL stopped for 15-30 s) plus a restart
 * of all four services and a controller kill, then the leak audit. Calls during an outage may only be retried
 * (ABORTED, UNAVAILABLE, DEADLINE_EXCEEDED): a false OK shows as a lost volume, anything else as an unexpected answer.
 */
const TIMEOUT_MS = 10 * 60_000;
const FAULTS = ['history-restart', 'matching-restart', 'postgres-outage', 'temporal-restart', 'controller-kill'];

describe('soak against the production-style Temporal (short run)', () => {
  it(
    'loses, leaks and duplicates nothing when history, matching or PostgreSQL go away',
    () => {
      const args = ['--temporal', 'prod', '--ops', '100', '--faults', FAULTS.join(',')];
      const report = runSoakForTest(args, 'soak-prod-report.json', TIMEOUT_MS - 30_000);
      expect(report.problems).toEqual([]);
      expect(report.audit).toMatchObject({ leaked: [], lost: [], duplicated: [], torn: [], pending: [] });
      expect(report.workload.unexpected).toEqual([]);
      expect(report.faults.map((fault) => fault.kind).sort()).toEqual([...FAULTS].sort());
      for (const fault of report.faults) {
        expect(fault.hit.total).toBeGreaterThan(0);
        expect(fault.hit.retried.RESOURCE_EXHAUSTED).toBeUndefined();
      }
    },
    TIMEOUT_MS,
  );
});
