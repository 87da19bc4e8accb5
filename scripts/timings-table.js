#!/usr/bin/env node
'use strict';
// The per-suite table of docs/testing.md, from what test/support/timing-reporter.js wrote
// (test-artifacts/timings/<phase>.json): `node scripts/timings-table.js AFTER.json [BEFORE.json] [--top N]`.
// Wall time is the suite's own (beside others when the phase runs in parallel); CPU time is its jest worker's and
// the processes it started; waiting is wall minus CPU (timers, servers, other processes' turns).
const fs = require('fs');

function parseArgs(argv) {
  const files = [];
  let top = Infinity;
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--top') top = Number(argv[++i]);
    else files.push(argv[i]);
  }
  if (files.length < 1 || files.length > 2 || !(top > 0)) {
    process.stderr.write('usage: node scripts/timings-table.js AFTER.json [BEFORE.json] [--top N]\n');
    process.exit(2);
  }
  return { after: read(files[0]), before: files[1] && read(files[1]), top };
}

function read(file) {
  const phase = JSON.parse(fs.readFileSync(file, 'utf8'));
  if (!Array.isArray(phase.suites)) throw new Error(`${file} is not a timings file (no suites)`);
  return phase;
}

const seconds = (value) => (value === undefined ? '' : Math.round(value).toLocaleString('en-US'));

function table({ after, before, top }) {
  const earlier = new Map((before ? before.suites : []).map((suite) => [suite.suite, suite]));
  const header = before
    ? ['suite', 'wall s before', 'wall s', 'CPU s before', 'CPU s', 'waiting s']
    : ['suite', 'wall s', 'CPU s', 'waiting s'];
  const rows = [...after.suites]
    .sort((a, b) => b.wallSeconds - a.wallSeconds)
    .slice(0, top)
    .map((suite) => {
      const old = earlier.get(suite.suite);
      const name = `\`${suite.suite}\`${suite.failed ? ' (failed)' : ''}`;
      return before
        ? [
            name,
            seconds(old?.wallSeconds),
            seconds(suite.wallSeconds),
            seconds(old?.cpuSeconds),
            seconds(suite.cpuSeconds),
            seconds(suite.waitingSeconds),
          ]
        : [name, seconds(suite.wallSeconds), seconds(suite.cpuSeconds), seconds(suite.waitingSeconds)];
    });
  const summary = (phase) =>
    `${phase.suites.length} suites, ${seconds(phase.wallSeconds)} s wall, ${seconds(phase.cpuSeconds)} s CPU`;
  const lines = [
    `**${after.phase}**: ${summary(after)}${before ? ` (before, ${before.phase}: ${summary(before)})` : ''}`,
    '',
  ];
  lines.push(`| ${header.join(' | ')} |`, `| --- |${' ---: |'.repeat(header.length - 1)}`);
  for (const row of rows) lines.push(`| ${row.join(' | ')} |`);
  return `${lines.join('\n')}\n`;
}

module.exports = { table };
if (require.main === module) process.stdout.write(table(parseArgs(process.argv.slice(2))));
