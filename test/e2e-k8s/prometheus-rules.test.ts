import { load as loadYaml } from 'js-yaml';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { findProjectRoot } from '../../common/project-root';
import { RULES_FILE, readRules } from '../unit/deploy/promql-names';
import { chartTools } from './chart-render';

/**
 * issue 36 item 2: the shipped alerts (deploy/chart/files/prometheus-rules.yaml) are valid rules, each fires on the
 * situation it names (once, whatever the number of controller replicas) and not on its neighbours
 * (prometheus-rules.promtool.yaml, run by `promtool test rules`), and each has its runbook in docs/operations.md.
 * Which metrics they read exist: test/integration/monitoring-metrics.test.ts reads them from live processes.
 */
const { promtool } = chartTools();
const TESTS = path.join(__dirname, 'prometheus-rules.promtool.yaml');
const alerts = readRules().groups.flatMap((group) => group.rules.flatMap((rule) => (rule.alert ? [rule] : [])));

it('promtool accepts the rule file', () => {
  expect(execFileSync(promtool, ['check', 'rules', RULES_FILE], { encoding: 'utf8' })).toContain('SUCCESS');
});

it('every alert fires where it should and nowhere else (promtool test rules)', () => {
  const tested = new Set(
    (
      loadYaml(fs.readFileSync(TESTS, 'utf8')) as { tests: { alert_rule_test?: { alertname: string }[] }[] }
    ).tests.flatMap((test) => (test.alert_rule_test ?? []).map((check) => check.alertname)),
  );
  expect(alerts.map((alert) => alert.alert).filter((name) => !tested.has(name!))).toEqual([]);
  // Exits non-zero, with the alerts it expected and got, on any difference.
  expect(execFileSync(promtool, ['test', 'rules', TESTS], { encoding: 'utf8' })).toContain('SUCCESS');
});

it('every alert links its runbook, a section of docs/operations.md', () => {
  const operations = fs.readFileSync(path.join(findProjectRoot(), 'docs/operations.md'), 'utf8');
  // GitHub's anchors: the heading lower-cased, spaces to dashes, other punctuation dropped.
  const anchors = new Set(
    [...operations.matchAll(/^#+ (.+)$/gm)].map(([, heading]) =>
      heading!
        .toLowerCase()
        .replace(/[^\w\- ]/g, '')
        .replace(/ /g, '-'),
    ),
  );
  for (const alert of alerts) {
    const runbook = alert.annotations?.runbook_url ?? '';
    expect(runbook).toMatch(/\/docs\/operations\.md#/);
    expect([alert.alert, anchors.has(runbook.split('#')[1] ?? '')]).toEqual([alert.alert, true]);
  }
});
