import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { KubeError } from '../e2e-k8s/kube-rest';
import type { RealCluster } from '../e2e-node/real-cluster';
import { RolloutWatch, type PluginRunning } from '../e2e-node/rollout-watch';

/**
 * The audit of test/e2e-node/rollout-watch.ts, per node (issue 35): what it must call a violation, on a cluster
 * whose API is a table of PVs and whose nodes' plugins the test switches. The real-node suites run it against real
 * clusters; this shows it fails where it must.
 */
const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) fs.rmSync(dir, { recursive: true, force: true });
});

function fakeCluster(pvs: Set<string>): RealCluster {
  return {
    api: {
      get: (objectPath: string) => {
        const name = objectPath.split('/').pop() ?? '';
        if (objectPath.includes('/persistentvolumes/') && !pvs.has(name))
          return Promise.reject(new KubeError(404, 'not found'));
        return Promise.resolve({ items: [] });
      },
    },
  } as unknown as RealCluster;
}

async function watchOnce(
  pvs: Set<string>,
  watched: { pv: string; onDisk: boolean; node?: string }[],
  running: PluginRunning,
): Promise<string[]> {
  const pool = fs.mkdtempSync(path.join(os.tmpdir(), 'dcsi-watch-'));
  dirs.push(pool);
  const entries = watched.map(({ pv, onDisk, node }) => {
    const dir = path.join(pool, pv);
    if (onDisk) fs.mkdirSync(dir);
    return { pv, dir, node };
  });
  const watch = new RolloutWatch(fakeCluster(pvs), entries, () => 0, running);
  watch.start(5);
  await new Promise((resolve) => setTimeout(resolve, 50));
  await watch.stop();
  return watch.violations;
}

test('a PV gone while its volume is on its node: a violation', async () => {
  const violations = await watchOnce(new Set(), [{ pv: 'pv-a', onDisk: true, node: 'n1' }], () => true);
  expect(violations).toEqual(['pv-a gone while its data pv-a is on disk']);
});

test("a PV gone while its own node's plugin is down: a violation naming the node, whatever runs elsewhere", async () => {
  const violations = await watchOnce(
    new Set(),
    [{ pv: 'pv-a', onDisk: false, node: 'n1' }],
    (node) => node === undefined || node === 'n2',
  );
  expect(violations).toEqual(['pv-a gone while no node plugin container ran on n1']);
});

test('a PV gone with its volume gone and its node plugin running; a PV still there: no violation', async () => {
  const violations = await watchOnce(
    new Set(['pv-b']),
    [
      { pv: 'pv-a', onDisk: false, node: 'n1' },
      { pv: 'pv-b', onDisk: true, node: 'n2' },
    ],
    (node) => node !== 'n2',
  );
  expect(violations).toEqual([]);
});
