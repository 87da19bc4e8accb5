'use strict';
// A jest reporter that writes, per suite, its wall time and the CPU time it cost, to
// test-artifacts/timings/<phase>.json (docs/testing.md, "Where the time goes"). CPU is the jest process tree's: jest,
// its workers and everything they started (the Temporal dev server, controllers, node agents, csi-sanity, kubelet),
// read from /proc as utime+stime of every live process under jest plus cutime+cstime (what exited and was reaped).
// Work beside the run (the background build, another checkout's tests) is not in it. With suites running side by
// side, the CPU of a window is split evenly among the suites running in it, so the column sums to the phase's CPU.
// "waiting" is wall time less CPU time: the time a suite spent on timers, servers and processes starting.
const fs = require('fs');
const path = require('path');

const TICK = 100; // USER_HZ on Linux

/** [pid, ppid, utime+stime+cutime+cstime] of every process, or [] where /proc is not Linux's. */
function processTable() {
  let entries;
  try {
    entries = fs.readdirSync('/proc');
  } catch {
    return [];
  }
  const rows = [];
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${entry}/stat`, 'utf8');
      // The command name (field 2) may hold spaces and parentheses: split after its last ')'.
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      const ppid = Number(fields[1]);
      const ticks = Number(fields[11]) + Number(fields[12]) + Number(fields[13]) + Number(fields[14]);
      rows.push([Number(entry), ppid, ticks]);
    } catch {
      // exited while we looked
    }
  }
  return rows;
}

/** CPU ticks of this process and every live descendant, reaped children included. */
function treeTicks(rootPid = process.pid) {
  const table = processTable();
  const children = new Map();
  for (const [pid, ppid] of table) {
    if (!children.has(ppid)) children.set(ppid, []);
    children.get(ppid).push(pid);
  }
  const ticksOf = new Map(table.map(([pid, , ticks]) => [pid, ticks]));
  let total = 0;
  const stack = [rootPid];
  while (stack.length > 0) {
    const pid = stack.pop();
    total += ticksOf.get(pid) ?? 0;
    stack.push(...(children.get(pid) ?? []));
  }
  return total;
}

/** A failure message without its colours, its stack cut to the first frames: enough to tell what failed and where. */
function plain(message) {
  const colours = new RegExp(`${String.fromCharCode(27)}\\[[0-9;]*m`, 'g');
  const lines = String(message).replace(colours, '').split('\n');
  const firstFrame = lines.findIndex((line) => /^\s+at /.test(line));
  return (firstFrame < 0 ? lines : lines.slice(0, firstFrame + 3)).slice(0, 60).join('\n');
}

class TimingReporter {
  constructor(globalConfig, options = {}) {
    this.root = globalConfig.rootDir;
    this.name = options.phase || process.env.DURABLE_CSI_TIMING_PHASE || 'jest';
    this.running = new Map();
    this.rows = [];
    this.failures = [];
    // A process that exits after the last sample but is reaped later is counted once reaped: the tree only grows.
    this.maxTicks = treeTicks();
    this.startTicks = this.maxTicks;
    this.startedAt = Date.now();
  }

  /** Hands the CPU spent since the last event to the suites running in that window, evenly. */
  account() {
    const ticks = Math.max(this.maxTicks, treeTicks());
    const share = this.running.size === 0 ? 0 : (ticks - this.maxTicks) / this.running.size;
    for (const entry of this.running.values()) entry.cpuTicks += share;
    this.maxTicks = ticks;
  }

  onTestFileStart(test) {
    this.account();
    this.running.set(test.path, { started: Date.now(), cpuTicks: 0, besideAtStart: this.running.size });
  }

  onTestFileResult(test, result) {
    this.account();
    const entry = this.running.get(test.path);
    this.running.delete(test.path);
    if (!entry) return;
    const wallSeconds = (Date.now() - entry.started) / 1000;
    const cpuSeconds = entry.cpuTicks / TICK;
    this.rows.push({
      suite: path.relative(this.root, test.path),
      project: test.context?.config?.displayName?.name,
      wallSeconds,
      cpuSeconds,
      waitingSeconds: Math.max(0, wallSeconds - cpuSeconds),
      tests: result.numPassingTests + result.numFailingTests + result.numPendingTests,
      failed: result.numFailingTests > 0 || Boolean(result.testExecError),
    });
    // What failed, in words, for scripts/test.js to print again at the end of the run: CI's output is kept as its
    // head and tail, and a long phase's failures land in the middle, under the figures its suites print.
    const failures = (result.testResults ?? [])
      .filter((assertion) => assertion.status === 'failed')
      .map((assertion) => ({ test: assertion.fullName, message: (assertion.failureMessages ?? []).join('\n') }));
    if (result.testExecError) failures.push({ test: '(the suite did not run)', message: result.testExecError.message });
    for (const failure of failures)
      this.failures.push({
        suite: path.relative(this.root, test.path),
        test: failure.test,
        message: plain(failure.message),
      });
  }

  onRunComplete() {
    this.account();
    const out = path.join(this.root, 'test-artifacts', 'timings');
    fs.mkdirSync(out, { recursive: true });
    const file = path.join(out, `${this.name.replace(/[^a-z0-9-]+/gi, '-')}.json`);
    const summary = {
      phase: this.name,
      wallSeconds: (Date.now() - this.startedAt) / 1000,
      cpuSeconds: (this.maxTicks - this.startTicks) / TICK,
      suites: this.rows.sort((a, b) => b.wallSeconds - a.wallSeconds),
      failures: this.failures,
    };
    fs.writeFileSync(file, JSON.stringify(summary, null, 2));
  }
}

module.exports = TimingReporter;
