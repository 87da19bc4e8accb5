import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { AGENT_RUNTIME_ENV, applyAgentHeapTuning, withAgentRuntimeEnv } from '../../../agent/process-tuning';
import { findProjectRoot } from '../../../common/project-root';

/** The compiled module, as the agents load it. */
const TUNING_MODULE = path.join(findProjectRoot(), 'dist', 'agent', 'process-tuning.js');

describe('the agents runtime settings', () => {
  it('are what the container image sets', () => {
    // deploy/image.json: the image's one recipe (npm run image builds it and its smoke test runs the image).
    const image = JSON.parse(fs.readFileSync(path.join(findProjectRoot(), 'deploy', 'image.json'), 'utf8')) as {
      env: Record<string, string>;
    };
    for (const [name, value] of Object.entries(AGENT_RUNTIME_ENV)) expect(image.env[name]).toBe(value);
  });

  it('are added to a spawned agent, keeping what the caller set', () => {
    expect(withAgentRuntimeEnv({ PATH: '/bin' })).toEqual({
      PATH: '/bin',
      MALLOC_ARENA_MAX: '2',
      NODE_OPTIONS: '--max-semi-space-size=1',
    });
    expect(withAgentRuntimeEnv({ NODE_OPTIONS: '--require x.js', MALLOC_ARENA_MAX: '4' })).toEqual({
      NODE_OPTIONS: '--require x.js --max-semi-space-size=1',
      MALLOC_ARENA_MAX: '4',
    });
    expect(withAgentRuntimeEnv({ NODE_OPTIONS: '--max-semi-space-size=8' }).NODE_OPTIONS).toBe(
      '--max-semi-space-size=8',
    );
  });
});

describe('the agents heap tuning', () => {
  // A live set of about 20 MB, and a stream of garbage at a high rate (what a drain's replays are).
  const churn = `
    const live = []; let peak = 0;
    for (let round = 0; round < 400; round++) {
      const garbage = [];
      for (let i = 0; i < 2000; i++) garbage.push({ a: 'x'.repeat(50) + i, b: [i, i + 1], c: { d: i } });
      live.push(garbage.slice(0, 100)); if (live.length > 200) live.shift();
      peak = Math.max(peak, process.memoryUsage().heapTotal);
    }
    process.stdout.write(String(peak));`;
  const peakHeap = (tuned: boolean) => {
    const apply = tuned ? `require(${JSON.stringify(TUNING_MODULE)}).applyAgentHeapTuning();` : '';
    return Number(
      execFileSync(process.execPath, ['--max-semi-space-size=1', '-e', apply + churn], { encoding: 'utf8' }),
    );
  };

  it('keeps a heap under high churn well below what V8 lets it grow to', () => {
    const untuned = peakHeap(false);
    const tuned = peakHeap(true);
    expect(tuned).toBeLessThan(0.75 * untuned);
  });

  it('yields to a factor given on node’s own command line', () => {
    expect(applyAgentHeapTuning(['--heap-growing-percent=80'])).toBe(false);
  });
});
