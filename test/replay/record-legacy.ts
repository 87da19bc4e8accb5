import { Client, Connection } from '@temporalio/client';
import { bundleWorkflowCode, DefaultLogger, NativeConnection, Worker } from '@temporalio/worker';
import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { deleteWorkflowId } from '../../common/names';
import { findProjectRoot } from '../../common/project-root';
import { formatVolumeId } from '../../common/volume-id';
import { nodeForgottenSignal } from '../../workflows/node-forgotten';
import { until } from '../support/create-history';

/** The commit that recorded the release-0.1 fixtures: release 0.1's workflow code. */
export const RELEASE_0_1 = '996eb0e';

/**
 * A deletion started by release 0.1 whose registry read completes under this code and finds no node: 0.1 answered
 * "never registered" (a false deleted), this code waits (`unknown-node-waits`) until the node is forgotten. Only a
 * run started by 0.1 reaches that branch, so its history is made as in a rollout: release 0.1's workflow code
 * (from git, bundled here) runs the first workflow task and schedules the registry read, then stops; a worker of
 * this code picks the run up, the read answers no node, the deletion waits for the node, and a forget ends it.
 */
export async function recordReleaseDeletionOfUnknownNode(address: string, namespace: string): Promise<string> {
  const driverName = `legacy-${randomUUID().slice(0, 8)}.durable-csi.io`;
  const taskQueue = `${driverName}/control`;
  const parts = { nodeId: 'node-never-seen', poolIdPrefix: '0123456789abcdef', key: 'd'.repeat(32) };
  const volumeId = formatVolumeId(parts);
  const workflowId = deleteWorkflowId(driverName, volumeId);
  const [native, connection] = await Promise.all([
    NativeConnection.connect({ address }),
    Connection.connect({ address }),
  ]);
  try {
    const client = new Client({ connection, namespace });
    const worker = (code: string, activities: object = {}) =>
      Worker.create({ connection: native, namespace, taskQueue, workflowBundle: { code }, activities });
    const released = await worker(await bundleRelease());
    const handle = await client.workflow.start('deleteVolume', {
      workflowId,
      taskQueue,
      args: [{ driverName, volumeId, ...parts }],
    });
    const scheduled = async (type: string) =>
      (await handle.fetchHistory()).events?.some(
        (event) => event.activityTaskScheduledEventAttributes?.activityType?.name === type,
      ) ?? false;
    await released.runUntil(until(() => scheduled('readRegistry'), 'release 0.1 schedules the registry read'));

    const current = await bundleWorkflowCode({
      workflowsPath: require.resolve('../../workflows'),
      logger: new DefaultLogger('WARN'),
    });
    const activities = { readRegistry: async () => [], recordWriteOff: async () => undefined };
    await (
      await worker(current.code, activities)
    ).runUntil(async () => {
      await until(() => scheduled('deleteVolumeOnNode'), 'the deletion waits for its node');
      const at = new Date().toISOString();
      await handle.signal(nodeForgottenSignal, { nodeId: parts.nodeId, reason: 'recorded: gone for good', at });
      await handle.result();
    });
    return workflowId;
  } finally {
    await connection.close();
    await native.close();
  }
}

/** Release 0.1's workflows, exported from git and bundled with this checkout's SDK. */
async function bundleRelease(): Promise<string> {
  const root = findProjectRoot();
  const tree = fs.mkdtempSync(path.join(os.tmpdir(), 'dcsi-release-0.1-'));
  try {
    const archive = execFileSync('git', ['-C', root, 'archive', RELEASE_0_1, 'workflows', 'common', 'activities']);
    execFileSync('tar', ['-x', '-C', tree], { input: archive });
    const { code } = await bundleWorkflowCode({
      workflowsPath: path.join(tree, 'workflows', 'index.ts'),
      logger: new DefaultLogger('WARN'),
      // The exported tree has no node_modules: resolve the SDK from this checkout.
      webpackConfigHook: (config) => ({
        ...config,
        resolve: { ...config.resolve, modules: [path.join(root, 'node_modules'), 'node_modules'] },
      }),
    });
    return code;
  } finally {
    fs.rmSync(tree, { recursive: true, force: true });
  }
}
