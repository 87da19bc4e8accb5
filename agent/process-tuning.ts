import v8 from 'node:v8';

/**
 * How the controller and node agents are run, wherever they run: the container image sets the same variables
 * (deploy/image.json's env, what npm run image builds; a unit test keeps the two equal). Measured in docs/performance.md:
 * - MALLOC_ARENA_MAX=2: glibc otherwise gives each of the Temporal core's threads its own malloc arena, and freed
 *   memory stays in them (about 20 MB of an idle controller).
 * - --max-semi-space-size=1: V8 otherwise lets each isolate's young generation grow to 2 x 16 MB under a high
 *   allocation rate (the controller has two isolates, a node agent one); no CPU cost was measurable.
 * Both must be set before the process starts: glibc reads the first at start-up, V8 sizes isolates as they are made.
 */
export const AGENT_RUNTIME_ENV = {
  MALLOC_ARENA_MAX: '2',
  NODE_OPTIONS: '--max-semi-space-size=1',
} as const;

/** `env` with the agents' runtime settings added; a setting the caller gave already wins. */
export function withAgentRuntimeEnv(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const nodeOptions = env.NODE_OPTIONS ?? '';
  return {
    ...env,
    MALLOC_ARENA_MAX: env.MALLOC_ARENA_MAX ?? AGENT_RUNTIME_ENV.MALLOC_ARENA_MAX,
    NODE_OPTIONS: nodeOptions.includes('--max-semi-space-size')
      ? nodeOptions
      : `${nodeOptions} ${AGENT_RUNTIME_ENV.NODE_OPTIONS}`.trim(),
  };
}

/**
 * How far V8 lets a heap grow beyond what survived its last full collection before it collects again: 1.3 times.
 * V8's own factor rises towards 4 under a high allocation rate, which is what a drain is (hundreds of evicted
 * workflows replayed, each instantiating the workflow modules afresh): the controller peaked at 380 to 570 MB in
 * the benchmark's drain, 245 to 260 MB with this (docs/performance.md). Unlike --max-old-space-size it bounds
 * nothing: a larger live set still fits, at the price of more frequent full collections.
 */
export const HEAP_GROWING_PERCENT = 30;

/**
 * Applies HEAP_GROWING_PERCENT to this process's isolates, the workflow thread's included (created later). Node
 * refuses the flag in NODE_OPTIONS, so the agents set it themselves; one on node's own command line wins.
 */
export function applyAgentHeapTuning(execArgv: string[] = process.execArgv): boolean {
  if (execArgv.some((arg) => arg.startsWith('--heap-growing-percent') || arg.startsWith('--heap_growing_percent')))
    return false;
  v8.setFlagsFromString(`--heap-growing-percent=${HEAP_GROWING_PERCENT}`);
  return true;
}
