import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { findProjectRoot } from '../../temporal-dev/project-root';

/** Image ref -> docker-archive tar, as the project's image build prints it. */
export type ImageTars = Record<string, string>;

/**
 * The images the node runs, built by the project (`npm run image`, cached; docs/kubernetes.md): the driver, the
 * sidecars from the e2e's own Go builds, a pause and a busybox image; for Kubernetes' storage suite (`set` 'suite')
 * also the suite's own (agnhost and its shell images), which need the suite's Go build. DURABLE_CSI_NODE_IMAGES=<json
 * file> names prebuilt tars instead (same shape). A missing image fails the test: it is never skipped.
 */
export function nodeImages(set: 'node' | 'suite' = 'node'): ImageTars {
  const which = set === 'suite' ? '--all' : '--node';
  const override = process.env.DURABLE_CSI_NODE_IMAGES;
  const root = findProjectRoot();
  let images: ImageTars;
  if (override) images = JSON.parse(fs.readFileSync(override, 'utf8')) as ImageTars;
  else {
    const scripts = (JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')) as { scripts: object })
      .scripts;
    if (!('image' in scripts)) throw new Error('package.json has no `image` script: the node has no images to run');
    execFileSync('npm', ['run', '--silent', 'image', '--', which], {
      cwd: root,
      stdio: ['ignore', 'inherit', 'inherit'],
    });
    images = JSON.parse(
      execFileSync('npm', ['run', '--silent', 'image', '--', '--print', ...(set === 'suite' ? [] : ['--node'])], {
        cwd: root,
        encoding: 'utf8',
      }),
    ) as ImageTars;
  }
  const missing = Object.entries(images).filter(([, tar]) => !fs.existsSync(tar));
  if (missing.length > 0) throw new Error(`image tars missing: ${missing.map(([ref, tar]) => `${ref} (${tar})`)}`);
  return images;
}

/** The one ref whose repository ends with `/name` (e.g. durable-csi, csi-provisioner, pause, library/busybox). */
export function imageRef(images: ImageTars, name: string): string {
  const refs = Object.keys(images).filter((ref) => ref.replace(/[:@][^/]*$/, '').endsWith(`/${name}`));
  if (refs.length !== 1 || !refs[0]) throw new Error(`expected one image named ${name}, found: ${refs.join(', ')}`);
  return refs[0];
}
