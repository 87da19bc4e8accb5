import type * as perfHooks from 'perf_hooks';
import { monitorEventLoopDelay } from 'perf_hooks';
import { EVENT_LOOP_MONITORING_PRECISION_MS, createProcessMetrics } from '../../../metrics/registry';

// prom-client's event loop lag collector reads perf_hooks.monitorEventLoopDelay: watch what it asks for.
jest.mock('perf_hooks', () => {
  const actual = jest.requireActual<typeof perfHooks>('perf_hooks');
  return { ...actual, monitorEventLoopDelay: jest.fn(actual.monitorEventLoopDelay) };
});

describe('process metrics', () => {
  it('samples the event loop lag every 100 ms, not every 10 ms (a timer that costs an idle process its CPU)', async () => {
    const metrics = createProcessMetrics('test');
    expect(EVENT_LOOP_MONITORING_PRECISION_MS).toBeGreaterThanOrEqual(100);
    expect(jest.mocked(monitorEventLoopDelay)).toHaveBeenCalledWith({ resolution: EVENT_LOOP_MONITORING_PRECISION_MS });
    // The lag is still exported.
    expect(await metrics.registry.metrics()).toContain('durable_csi_process_nodejs_eventloop_lag_p99_seconds');
  });
});
