'use strict';
// A jest reporter that writes, per suite, its wall time and the machine's CPU time while it ran, to
// test-artifacts/timings/<phase>.json (docs/testing.md, "Where the time goes"). CPU is read from /proc/stat: user,
// system, irq and softirq of every core, and not the `nice` column, so the background build (nice 19) is left out and
// what is counted is the suites' own processes, the Temporal server and the kernel working for them. With suites
// running side by side the CPU of a window is shared by every suite in it: each suite's share is the window's CPU
// split evenly among the suites running then, so the column still sums to the phase's CPU.
const fs = require('fs');
const path = require('path');

const TICK = 100; // USER_HZ on Linux

function busyTicks() {
  try {
    const line = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0] ?? '';
    const [, user, , system, , , irq, softirq] = line.trim().split(/\s+/).map(Number);
    return user + system + irq + softirq;
  } catch {
    return 0;
  }
}

class TimingReporter {
  constructor(globalConfig, options = {}) {
    this.root = globalConfig.rootDir;
    this.name = options.phase || process.env.DURABLE_CSI_TIMING_PHASE || 'jest';
    this.running = new Map();
    this.rows = [];
    this.lastTicks = busyTicks();
    this.lastAt = Date.now();
    this.startedAt = Date.now();
    this.startTicks = this.lastTicks;
  }

  /** Hands the CPU spent since the last event to the suites running in that window, evenly. */
  account() {
    const ticks = busyTicks();
    const share = this.running.size === 0 ? 0 : (ticks - this.lastTicks) / this.running.size;
    for (const entry of this.running.values()) entry.cpuTicks += share;
    this.lastTicks = ticks;
    this.lastAt = Date.now();
  }

  onTestFileStart(test) {
    this.account();
    this.running.set(test.path, { started: Date.now(), cpuTicks: 0, overlap: this.running.size });
  }

  onTestFileResult(test, result) {
    this.account();
    const entry = this.running.get(test.path);
    this.running.delete(test.path);
    if (!entry) return;
    this.rows.push({
      suite: path.relative(this.root, test.path),
      project: test.context?.config?.displayName?.name,
      wallSeconds: (Date.now() - entry.started) / 1000,
      cpuSeconds: entry.cpuTicks / TICK,
      tests: result.numPassingTests + result.numFailingTests + result.numPendingTests,
      failed: result.numFailingTests > 0 || Boolean(result.testExecError),
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
      cpuSeconds: (busyTicks() - this.startTicks) / TICK,
      suites: this.rows.sort((a, b) => b.wallSeconds - a.wallSeconds),
    };
    fs.writeFileSync(file, JSON.stringify(summary, null, 2));
  }
}

module.exports = TimingReporter;
