import fs from 'node:fs';
import path from 'node:path';
import { summarize } from '../bench/stats';
import type { Deployed } from './deployed-node';
import type { RealCluster } from './real-cluster';

/**
 * The figures the issue asks for, for one StorageClass: `count` claims, `parallel` at a time, each timed from the
 * claim's creation to its Pod Running, and from the claim's deletion (its Pod gone) to its PV gone. Recorded in
 * node.timings under `label`; afterwards no pool holds a volume and no kubelet a CSI mount. On a cluster of several
 * nodes the Pods go where the scheduler puts them (WaitForFirstConsumer), and each node's share is recorded.
 */
export async function classFigures(
  real: Deployed<RealCluster>,
  label: string,
  storageClass: string,
  size: string,
  count = 30,
  parallel = 5,
): Promise<void> {
  const { node, work } = real;
  const bound: number[] = [];
  const running: number[] = [];
  const gone: number[] = [];
  const perNode = new Map<string, number>();
  const started = Date.now();
  const prefix = label.replace(/\W+/g, '-');
  const names = Array.from({ length: count }, (_, i) => `${prefix}-fig-${i}`);
  for (let i = 0; i < names.length; i += parallel) {
    await Promise.all(
      names.slice(i, i + parallel).map(async (name) => {
        const t0 = Date.now();
        await work.claim(name, storageClass, size);
        await work.pod(name, name, { script: `echo ${name} > /data/f` });
        const binding = waitBound(real, name).then(() => bound.push(Date.now() - t0));
        const pod = await work.waitRunning(name);
        running.push(Date.now() - t0);
        const on = pod.spec?.nodeName ?? '';
        perNode.set(on, (perNode.get(on) ?? 0) + 1);
        await binding;
        expect(work.exec(name, 'cat /data/f')).toBe(`${name}\n`);
        await work.deletePod(name);
        const pv = (await work.getClaim(name)).spec?.volumeName ?? '';
        const t1 = Date.now();
        await work.deleteClaim(name);
        await work.waitGone(`/api/v1/persistentvolumes/${pv}`, `PV ${pv}`);
        gone.push(Date.now() - t1);
      }),
    );
  }
  const binds = summarize(bound, Date.now() - started);
  const up = summarize(running, Date.now() - started);
  const down = summarize(gone, Date.now() - started);
  node.timings[`${label}: PVC created -> Bound p50`] = binds.p50 / 1000;
  node.timings[`${label}: PVC created -> Bound p99`] = binds.p99 / 1000;
  node.timings[`${label}: PVC created -> Pod Running p50`] = up.p50 / 1000;
  node.timings[`${label}: PVC created -> Pod Running p99`] = up.p99 / 1000;
  node.timings[`${label}: PVC deleted -> PV gone p50`] = down.p50 / 1000;
  node.timings[`${label}: PVC deleted -> PV gone p99`] = down.p99 / 1000;
  node.timings[`${label}: ${count} Pods, ${parallel} at a time, total`] = (Date.now() - started) / 1000;
  if (node.nodes.length > 1)
    for (const [on, pods] of [...perNode].sort()) node.timings[`${label}: Pods on ${on} (count)`] = pods;
  expect(running).toHaveLength(count);
  for (const each of node.nodes) {
    expect(fs.readdirSync(path.join(each.poolDir, 'volumes'))).toEqual([]);
    expect(each.mountinfo()).not.toContain('kubernetes.io~csi');
  }
}

/** Until the claim is Bound (WaitForFirstConsumer: once its Pod is scheduled and the volume made), polled. */
async function waitBound(real: Deployed<RealCluster>, name: string, timeoutMs = 180_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  while ((await real.work.getClaim(name)).status?.phase !== 'Bound') {
    if (Date.now() > until) throw new Error(`PVC ${name} not Bound after ${timeoutMs / 1000} s`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}
