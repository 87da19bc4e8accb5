import fs from 'node:fs';
import path from 'node:path';
import { AGENT_RUNTIME_ENV, withAgentRuntimeEnv } from '../../../agent/process-tuning';
import { findProjectRoot } from '../../../temporal-dev/project-root';

describe('the agents runtime settings', () => {
  it('are what the container image sets', () => {
    const containerfile = fs.readFileSync(path.join(findProjectRoot(), 'deploy', 'Containerfile'), 'utf8');
    const env = new Map(
      containerfile
        .split('\n')
        .filter((line) => line.startsWith('ENV '))
        .flatMap((line) => line.slice(4).trim().split(/\s+/))
        .map((pair) => [pair.slice(0, pair.indexOf('=')), pair.slice(pair.indexOf('=') + 1)] as const),
    );
    for (const [name, value] of Object.entries(AGENT_RUNTIME_ENV)) expect(env.get(name)).toBe(value);
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
