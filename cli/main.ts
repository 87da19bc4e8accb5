#!/usr/bin/env node
import { Command } from 'commander';
import { DEFAULT_DRIVER_NAME } from '../common/names';
import { driverVersion } from '../common/version';
import { controllerCommand } from './controller-command';
import { devCommand } from './dev-command';
import { nodeCommand } from './node-command';
import { nodesCommand } from './nodes-command';
import { volumesCommand } from './volumes-command';

/** durable-csi: thin entry; each subcommand parses its flags once and calls a run() function. */
const program = new Command('durable-csi')
  .description('A node-local CSI driver whose provisioning runs as durable Temporal workflows')
  .version(driverVersion())
  .showHelpAfterError();

program.addCommand(controllerCommand(DEFAULT_DRIVER_NAME));
program.addCommand(nodeCommand(DEFAULT_DRIVER_NAME));
program.addCommand(devCommand());
program.addCommand(volumesCommand());
program.addCommand(nodesCommand());

program.parseAsync(process.argv).catch((error: unknown) => {
  process.stderr.write(`durable-csi: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
