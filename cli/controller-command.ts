import { Command } from 'commander';
import { runController } from '../agent/controller';
import { parseDuration } from '../common/duration';
import { parseQuantity } from '../common/quantity';
import { parseNodeDeletedPolicy } from '../kubernetes/node-deleted-policy';
import { addMetricsOptions, addTemporalOptions, temporalConfig, type TemporalFlags } from './temporal-options';

export function controllerCommand(defaultDriverName: string): Command {
  const command = new Command('controller')
    .description('run the CSI controller (Identity + Controller services) and the workflow worker')
    .requiredOption('--endpoint <endpoint>', 'CSI endpoint, unix:///path/controller.sock or tcp://host:port')
    .option('--driver-name <name>', 'CSI driver name', defaultDriverName)
    .option('--call-wait <duration>', 'longest a CSI call waits for its workflow before answering ABORTED', '8s')
    .option('--max-volume-size <size>', 'largest volume accepted; larger requests are OUT_OF_RANGE', '16Ti')
    .option('--health-address <host:port>', "serve the Pod's liveness probe at http://host:port/healthz")
    .option(
      '--snapshots',
      'serve CreateSnapshot, DeleteSnapshot, ListSnapshots, volumes from a snapshot or a clone, and group ' +
        'snapshots (the GroupController) (docs/snapshots.md)',
    )
    .option('--kubernetes', 'watch Kubernetes (KUBECONFIG, else the in-cluster ServiceAccount): Node-deleted policy')
    .option(
      '--node-deleted <policy>',
      'when a Node holding volumes is deleted: wait, or forget-after:DURATION (needs --kubernetes)',
      'wait',
    )
    .option(
      '--agent-pods <selector>',
      "label selector of the node agents' Pods: one Kubernetes reports not running or not ready turns its node " +
        'offline at once, not after its --presence-timeout (needs --kubernetes; docs/scale.md)',
    )
    .option('--agent-namespace <namespace>', "the agents' Pods' namespace (default: the controller's own)");
  return addMetricsOptions(addTemporalOptions(command)).action(
    async (
      flags: TemporalFlags & {
        endpoint: string;
        driverName: string;
        callWait: string;
        maxVolumeSize: string;
        kubernetes?: boolean;
        snapshots?: boolean;
        nodeDeleted: string;
        agentPods?: string;
        agentNamespace?: string;
        healthAddress?: string;
      },
    ) => {
      const nodeDeleted = parseNodeDeletedPolicy(flags.nodeDeleted);
      if (nodeDeleted.kind !== 'wait' && !flags.kubernetes)
        throw new Error(`--node-deleted=${flags.nodeDeleted} acts on Kubernetes Nodes: add --kubernetes`);
      if ((flags.agentPods || flags.agentNamespace) && !flags.kubernetes)
        throw new Error('--agent-pods watches Kubernetes Pods: add --kubernetes');
      if (flags.agentNamespace && !flags.agentPods)
        throw new Error("--agent-namespace needs --agent-pods (the label selector of the agents' Pods)");
      await runController({
        endpoint: flags.endpoint,
        driverName: flags.driverName,
        temporal: temporalConfig(flags),
        metricsAddress: flags.metricsAddress,
        sdkMetricsAddress: flags.sdkMetricsAddress,
        callWaitMs: parseDuration(flags.callWait),
        maxVolumeBytes: parseQuantity(flags.maxVolumeSize),
        kubernetes: flags.kubernetes,
        snapshots: flags.snapshots === true,
        nodeDeleted,
        agentPods: flags.agentPods ? { selector: flags.agentPods, namespace: flags.agentNamespace } : undefined,
        healthAddress: flags.healthAddress,
      });
    },
  );
}
