import { Runtime } from '@temporalio/worker';

/**
 * Installs the Temporal SDK runtime once per process: without its own signal handlers (ours stop the CSI
 * server before the worker), and with the SDK's Prometheus endpoint when an address is given.
 */
export function installTemporalRuntime(sdkMetricsAddress?: string): void {
  Runtime.install({
    shutdownSignals: [],
    ...(sdkMetricsAddress ? { telemetryOptions: { metrics: { prometheus: { bindAddress: sdkMetricsAddress } } } } : {}),
  });
}
