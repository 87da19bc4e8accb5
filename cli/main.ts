#!/usr/bin/env node
import { Command } from 'commander';
import { tetherToSpawner } from '../agent/shutdown';
import { DEFAULT_DRIVER_NAME } from '../common/names';
import { driverVersion } from '../common/version';

tetherToSpawner();

/**
 * Each subcommand's module is loaded only when that command runs: `volumes list` must not pay for the
 * workflow worker, its native bridge and webpack (docs/cli-startup.md has the figures).
 */
const COMMANDS: Record<string, () => Promise<Command>> = {
  controller: async () => (await import('./controller-command')).controllerCommand(DEFAULT_DRIVER_NAME),
  node: async () => (await import('./node-command')).nodeCommand(DEFAULT_DRIVER_NAME),
  dev: async () => (await import('./dev-command')).devCommand(),
  volumes: async () => (await import('./volumes-command')).volumesCommand(),
  nodes: async () => (await import('./nodes-command')).nodesCommand(),
  snapshots: async () => (await import('./snapshots-command')).snapshotsCommand(),
};

/** durable-csi: thin entry; each subcommand parses its flags once and calls a run() function. */
async function main(argv: string[]): Promise<void> {
  const program = new Command('durable-csi')
    .description('A node-local CSI driver whose provisioning runs as durable Temporal workflows')
    .version(driverVersion())
    .showHelpAfterError();
  const first = argv[2] ?? '';
  // --version needs none; help and unknown commands list them all.
  const needed = ['-V', '--version'].includes(first)
    ? []
    : Object.hasOwn(COMMANDS, first)
      ? [first]
      : Object.keys(COMMANDS);
  for (const name of needed) program.addCommand(await COMMANDS[name]!());
  await program.parseAsync(argv);
}

main(process.argv).catch((error: unknown) => {
  process.stderr.write(`durable-csi: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
