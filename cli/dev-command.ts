import path from 'node:path';
import { Command } from 'commander';
import { devDataDir } from '../agent/dev-layout';

export function devCommand(): Command {
  return new Command('dev')
    .description('run the whole stack on this machine: Temporal dev server, a controller and node agents')
    .option('--data-dir <dir>', 'where the database, pools, sockets and logs live', devDataDir())
    .option('--nodes <count>', 'number of node agents', '3')
    .option('--capacity <size>', 'capacity of each node pool', '10Gi')
    .option('--port <port>', 'Temporal frontend port', '7233')
    .option('--ui-port <port>', 'Temporal Web UI port', '8233')
    .option('--metrics-port <port>', "controller's Prometheus port; node agents use the next ones", '9464')
    .action(
      async (flags: {
        dataDir: string;
        nodes: string;
        capacity: string;
        port: string;
        uiPort: string;
        metricsPort: string;
      }) => {
        const { runDevStack } = await import('../agent/dev-stack');
        const code = await runDevStack({
          dataDir: path.resolve(flags.dataDir),
          nodeCount: Number(flags.nodes),
          capacity: flags.capacity,
          port: Number(flags.port),
          uiPort: Number(flags.uiPort),
          metricsPort: Number(flags.metricsPort),
        });
        // Whatever is still pending (a readiness probe of a start that was interrupted) must not hold us.
        process.exit(code);
      },
    );
}
