import { Command } from 'commander';
import { runController } from '../agent/controller';
import { parseDuration } from '../common/duration';
import { parseQuantity } from '../common/quantity';
import { addMetricsOptions, addTemporalOptions, temporalConfig, type TemporalFlags } from './temporal-options';

export function controllerCommand(defaultDriverName: string): Command {
  const command = new Command('controller')
    .description('run the CSI controller (Identity + Controller services) and the workflow worker')
    .requiredOption('--endpoint <endpoint>', 'CSI endpoint, unix:///path/controller.sock or tcp://host:port')
    .option('--driver-name <name>', 'CSI driver name', defaultDriverName)
    .option('--call-wait <duration>', 'longest a CSI call waits for its workflow before answering ABORTED', '8s')
    .option('--max-volume-size <size>', 'largest volume accepted; larger requests are OUT_OF_RANGE', '16Ti');
  return addMetricsOptions(addTemporalOptions(command)).action(
    async (
      flags: TemporalFlags & { endpoint: string; driverName: string; callWait: string; maxVolumeSize: string },
    ) => {
      await runController({
        endpoint: flags.endpoint,
        driverName: flags.driverName,
        temporal: temporalConfig(flags),
        metricsAddress: flags.metricsAddress,
        sdkMetricsAddress: flags.sdkMetricsAddress,
        callWaitMs: parseDuration(flags.callWait),
        maxVolumeBytes: parseQuantity(flags.maxVolumeSize),
      });
    },
  );
}
