import { Metadata, status } from '@grpc/grpc-js';
import { Command, Option } from 'commander';
import { call, connectCsi, withDeadline } from '../csi/client';
import { readDeleteOutcome } from '../csi/controller-service';
import type { CreateVolumeResponse__Output } from '../csi/generated/csi/v1/CreateVolumeResponse';
import { TOPOLOGY_NODE_KEY } from '../common/names';
import { formatBytes, parseQuantity } from '../common/quantity';
import { describeDeleteOutcome } from './delete-outcome-text';
import { defaultControllerEndpoint } from '../agent/dev-layout';
import { describeUnanswered, listAllVolumes } from './list-all-volumes';
import { printJson } from './operator-options';
import { printTable } from './table';
import { addVolumeInspectCommands } from './volumes-inspect-commands';
import { orphansCommand } from './volumes-orphans-command';

/** A small human client over the controller's CSI socket: what external-provisioner would send. */
export function volumesCommand(): Command {
  const volumes = new Command('volumes')
    .description("create, delete and list through the controller's CSI socket; stuck and describe read Temporal")
    .option('--endpoint <endpoint>', 'controller CSI endpoint', defaultControllerEndpoint())
    .option('--timeout <seconds>', 'per-call deadline in seconds', '30');
  addCreateCommand(volumes);
  addDeleteCommand(volumes);
  addListCommand(volumes);
  addVolumeInspectCommands(volumes);
  volumes.addCommand(orphansCommand());
  return volumes;
}

function addCreateCommand(volumes: Command): void {
  volumes
    .command('create <name>')
    .description('CreateVolume; retries while the operation is in progress (ABORTED), as the CO does')
    .option('--size <size>', 'capacity, e.g. 1Gi', '1Gi')
    .option('--node <node>', 'require this node (a requisite topology)')
    .action(async (name: string, flags: { size: string; node?: string }) => {
      const topology = flags.node ? { segments: { [TOPOLOGY_NODE_KEY]: flags.node } } : undefined;
      const requiredBytes = parseQuantity(flags.size);
      const request = {
        name,
        capacity_range: { required_bytes: String(requiredBytes) },
        volume_capabilities: [{ mount: {}, access_mode: { mode: 'SINGLE_NODE_WRITER' as const } }],
        accessibility_requirements: topology ? { requisite: [topology], preferred: [topology] } : undefined,
      };
      const response = await withClients(volumes, (clients, timeoutMs) =>
        retryWhileAborted(() =>
          call<CreateVolumeResponse__Output>((done) =>
            clients.controller.CreateVolume(request, withDeadline(timeoutMs), done),
          ),
        ),
      );
      const volume = response.volume;
      const node = volume?.accessible_topology[0]?.segments[TOPOLOGY_NODE_KEY] ?? '?';
      if (requiredBytes === 0) {
        const size = formatBytes(Number(volume?.capacity_bytes));
        process.stderr.write(`--size 0 requests no particular size: the driver's default size, ${size}, was used\n`);
      }
      process.stdout.write(`${volume?.volume_id}\t${formatBytes(Number(volume?.capacity_bytes))}\t${node}\n`);
    });
}

function addDeleteCommand(volumes: Command): void {
  volumes
    .command('delete <volume-id>')
    .description('DeleteVolume once; a deletion waiting for its node is reported, and keeps going durably')
    .action(async (volumeId: string) => {
      const headers = await withClients(volumes, async (clients, timeoutMs) => {
        let received = new Metadata();
        await call((done) =>
          clients.controller
            .DeleteVolume({ volume_id: volumeId }, withDeadline(timeoutMs), done)
            .on('metadata', (metadata: Metadata) => (received = metadata)),
        );
        return received;
      });
      const { outcome, reason } = readDeleteOutcome(headers);
      process.stdout.write(`${describeDeleteOutcome(volumeId, outcome, reason)}\n`);
    });
}

function addListCommand(volumes: Command): void {
  volumes
    .command('list')
    .description('ListVolumes, every page; names the nodes that did not answer (their volumes are missing)')
    .addOption(
      new Option('--output <format>', 'table for people, json (stable field names) for scripts')
        .choices(['table', 'json'])
        .default('table'),
    )
    .action(async (flags: { output: 'table' | 'json' }) => {
      const listed = await withClients(volumes, listAllVolumes);
      if (flags.output === 'json') return printJson(listed);
      const rows = listed.volumes.map((v) => [v.volumeId, formatBytes(v.capacityBytes), v.nodeId]);
      printTable(['VOLUME ID', 'SIZE', 'NODE'], rows);
      const unanswered = describeUnanswered(listed.unansweredNodes);
      if (unanswered) process.stderr.write(`${unanswered}\n`);
    });
}

async function withClients<T>(
  command: Command,
  body: (clients: ReturnType<typeof connectCsi>, timeoutMs: number) => Promise<T>,
): Promise<T> {
  const options = command.opts<{ endpoint: string; timeout: string }>();
  const clients = connectCsi(options.endpoint);
  try {
    return await body(clients, Number(options.timeout) * 1000);
  } catch (error) {
    const details = (error as { details?: string; code?: number }).details;
    throw new Error(details ? `${grpcCodeName(error)}: ${details}` : String(error));
  } finally {
    clients.close();
  }
}

async function retryWhileAborted<T>(attempt: () => Promise<T>): Promise<T> {
  for (;;) {
    try {
      return await attempt();
    } catch (error) {
      if ((error as { code?: number }).code !== status.ABORTED) throw error;
      process.stderr.write(`${(error as { details?: string }).details}\n`);
      await new Promise((resolve) => setTimeout(resolve, 1000));
    }
  }
}

function grpcCodeName(error: unknown): string {
  const code = (error as { code?: number }).code;
  return code === undefined ? 'ERROR' : (status[code] ?? String(code));
}
