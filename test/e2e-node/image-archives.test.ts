import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { findProjectRoot } from '../../temporal-dev/project-root';
import { imageRef, nodeImages } from './images';

/**
 * issue 36 item 5: `npm run image` writes the driver's image twice, a docker-archive (what the nodes import) and an
 * OCI archive of the same image (what a registry takes), and prints the skopeo command that pushes the second. Same
 * image: the same configuration and the same layer contents (diff IDs), whatever compression each archive uses.
 */
jest.setTimeout(600_000);

const ROOT = findProjectRoot();
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { ociArchivePath } = require(path.join(ROOT, 'scripts/image/build.js')) as {
  ociArchivePath(tar: string): string;
};
const policy = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'dcsi-archives-')), 'policy.json');
fs.writeFileSync(policy, JSON.stringify({ default: [{ type: 'insecureAcceptAnything' }] }));
const config = (reference: string) =>
  JSON.parse(execFileSync('skopeo', ['--policy', policy, 'inspect', '--config', reference], { encoding: 'utf8' })) as {
    config: object;
    rootfs: { diff_ids: string[] };
  };

afterAll(() => fs.rmSync(path.dirname(policy), { recursive: true, force: true }));

it("the driver's OCI archive is the image of its docker-archive, and npm run image prints how to push it", () => {
  const images = nodeImages();
  const ref = imageRef(images, 'durable-csi');
  const tar = images[ref]!;
  const oci = ociArchivePath(tar);
  expect(fs.existsSync(oci)).toBe(true);
  const [docker, archived] = [config(`docker-archive:${tar}`), config(`oci-archive:${oci}`)];
  expect(archived.rootfs.diff_ids).toEqual(docker.rootfs.diff_ids);
  expect(archived.config).toEqual(docker.config);
  // Readable as an OCI layout, as a registry push reads it.
  const layout = path.join(path.dirname(policy), 'layout');
  execFileSync('skopeo', ['--policy', policy, 'copy', '--quiet', `oci-archive:${oci}`, `oci:${layout}:pushed`]);
  expect(JSON.parse(fs.readFileSync(path.join(layout, 'index.json'), 'utf8')).manifests).toHaveLength(1);

  // Everything cached: this only reports.
  const run = spawnSync(process.execPath, [path.join(ROOT, 'scripts/image/build.js')], { cwd: ROOT, encoding: 'utf8' });
  expect(run.status).toBe(0);
  const tag = ref.slice(ref.lastIndexOf(':') + 1);
  expect(run.stderr).toContain(`image: push it: skopeo copy oci-archive:${oci} docker://REGISTRY/`);
  expect(run.stderr).toContain(`durable-csi:${tag}\n`);
});
