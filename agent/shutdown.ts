import type { Logger } from '../common/logger';

let orderlyStopInstalled = false;

/**
 * For a process spawned with an IPC channel (spawn-cli.ts: the dev stack, the tests): until the command
 * installs its orderly stop, the channel closing (the spawner died, however) ends this process at once.
 */
export function tetherToSpawner(): void {
  if (!process.channel) return;
  process.once('disconnect', () => {
    if (!orderlyStopInstalled) process.exit(1);
  });
  // A tether, not a conversation: it must not keep the event loop alive.
  process.channel.unref();
}

/**
 * Runs `stop` once on SIGINT or SIGTERM, or when the process that spawned us with an IPC channel is gone. A
 * second signal exits at once.
 */
export function onShutdownSignal(logger: Logger, stop: () => Promise<void>): void {
  orderlyStopInstalled = true;
  let stopping = false;
  const begin = (why: Record<string, string>) => {
    stopping = true;
    logger.info(why, 'shutting down');
    stop().then(
      () => process.exit(0),
      (error: unknown) => {
        logger.error({ err: error }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  const handler = (signal: NodeJS.Signals) => {
    if (stopping) process.exit(130);
    begin({ signal });
  };
  process.on('SIGINT', handler);
  process.on('SIGTERM', handler);
  if (!process.channel) return;
  const spawnerGone = () => {
    if (!stopping) begin({ reason: 'the process that started this one is gone' });
  };
  if (!process.connected) spawnerGone();
  else process.once('disconnect', spawnerGone);
  process.channel.unref();
}
