/**
 * The PromQL the chart ships (the Grafana dashboard's targets and the alert rules' expressions) and the metric names
 * each reads, for the tests that hold them to what the driver exports (test/integration/monitoring-metrics.test.ts).
 */
import { load as loadYaml } from 'js-yaml';
import fs from 'node:fs';
import path from 'node:path';
import { DEPLOY } from './components';

export const RULES_FILE = path.join(DEPLOY, 'chart/files/prometheus-rules.yaml');
export const DASHBOARD_FILE = path.join(DEPLOY, 'chart/files/grafana-dashboard.json');

interface Panel {
  title?: string;
  targets?: { expr?: string }[];
  panels?: Panel[];
}
interface RuleFile {
  groups: {
    name: string;
    rules: { record?: string; alert?: string; expr: string; annotations?: Record<string, string> }[];
  }[];
}

export function readDashboard(): { panels: Panel[]; templating?: { list?: { type?: string; query?: unknown }[] } } {
  return JSON.parse(fs.readFileSync(DASHBOARD_FILE, 'utf8')) as ReturnType<typeof readDashboard>;
}

export function readRules(): RuleFile {
  return loadYaml(fs.readFileSync(RULES_FILE, 'utf8')) as RuleFile;
}

/** Every expression of the dashboard: its panels' targets (rows' panels too) and its query variables. */
export function dashboardQueries(): string[] {
  const dashboard = readDashboard();
  const walk = (panels: Panel[]): string[] =>
    panels.flatMap((panel) => [
      ...(panel.targets ?? []).flatMap((target) => (target.expr ? [target.expr] : [])),
      ...walk(panel.panels ?? []),
    ]);
  // Only query variables read metrics (a custom variable's query is its list of values).
  const variables = (dashboard.templating?.list ?? []).flatMap((variable) => {
    if (variable.type !== 'query') return [];
    const query = variable.query as string | { query?: string } | undefined;
    const text = typeof query === 'string' ? query : query?.query;
    // label_values(metric, label) names a metric too.
    return text ? [text.replace(/^label_values\(([^,)]+).*$/, '$1')] : [];
  });
  return [...walk(dashboard.panels), ...variables];
}

export function ruleQueries(): string[] {
  return readRules().groups.flatMap((group) => group.rules.map((rule) => rule.expr));
}

/** PromQL words that are not metric names when they stand alone. */
const KEYWORDS = new Set([
  'by',
  'without',
  'on',
  'ignoring',
  'group_left',
  'group_right',
  'and',
  'or',
  'unless',
  'bool',
  'offset',
  'inf',
  'nan',
]);

/**
 * The metric names a PromQL expression reads: identifiers outside strings, label matchers, ranges and grouping
 * clauses, not called as functions, not keywords or numbers. Grafana's variables ($node) and intervals
 * ($__rate_interval) are left out with the strings and ranges they stand in.
 */
export function metricNames(expr: string): string[] {
  const stripped = expr
    .replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'/g, ' ')
    .replace(/\{[^}]*\}/g, ' ')
    .replace(/\[[^\]]*\]/g, ' ')
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ')
    .replace(/\$\w+/g, ' ');
  const names = new Set<string>();
  for (const match of stripped.matchAll(/[A-Za-z_:][\w:]*/g)) {
    const word = match[0];
    const after = stripped.slice((match.index ?? 0) + word.length).trimStart();
    if (after.startsWith('(') || KEYWORDS.has(word.toLowerCase())) continue;
    names.add(word);
  }
  return [...names];
}
