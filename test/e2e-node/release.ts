import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { findProjectRoot } from '../../temporal-dev/project-root';

/** A released driver as an admin installs it: its image (built from the release commit) and its deploy/. */
export interface Release {
  tag: string;
  commit: string;
  /** The image's ref, as the release's own `npm run image` names it (ghcr.io/durable-csi/durable-csi:<version>). */
  ref: string;
  /** Its docker-archive tar. */
  tar: string;
  /** The release's deploy/ directory: its manifests, for an overlay (deploy-overlay.ts). */
  deployDir: string;
}

/**
 * The release `tag` of this repository: the commit's tree (git archive) built with its own scripts (npm ci, `npm
 * run image`) and kept under ~/.cache/durable-csi/releases/<commit>/ (or $DURABLE_CSI_RELEASES): built once per
 * commit, a second call is a lookup. Fails loudly, naming the step and its log, when the build does.
 */
export function releaseBuild(tag: string): Release {
  const root = findProjectRoot();
  const commit = releaseCommit(root, tag);
  const dir = path.join(releasesCache(), commit);
  const done = path.join(dir, 'release.json');
  if (fs.existsSync(done)) return JSON.parse(fs.readFileSync(done, 'utf8')) as Release;
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'dcsi-release-'));
  const log = path.join(scratch, 'build.log');
  // The release's image build keeps its parts in a cache of its own: npm run image keeps one version of each part
  // per cache and would evict the current build's. Seeded with links to the current cache's parts (content-keyed:
  // those whose inputs did not change, such as Debian's rootfs, are reused).
  const images = path.join(scratch, 'images');
  const current = imagesCache();
  if (fs.existsSync(current)) execFileSync('cp', ['-al', current, images]);
  const env = { ...process.env, DURABLE_CSI_IMAGES: images };
  const step = (what: string, command: string, args: string[], cwd: string): string => {
    try {
      const out = execFileSync(command, args, {
        cwd,
        env,
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'pipe'],
        maxBuffer: 64 * 1024 * 1024,
      });
      fs.appendFileSync(log, `--- ${what}\n${out}`);
      return out;
    } catch (error) {
      const { stdout = '', stderr = '' } = error as { stdout?: string; stderr?: string };
      throw new Error(`building ${tag} (${commit}) failed at ${what}:\n${stdout.slice(-3000)}\n${stderr.slice(-3000)}`);
    }
  };
  try {
    // A clean checkout of the commit, as the release was built: only then does its build call itself the bare
    // version (scripts/build-info.js), the image's tag and the agent's version included. --shared: the objects are
    // read from this repository, which is left as it was.
    const src = path.join(scratch, 'src');
    step('git clone', 'git', ['clone', '--quiet', '--shared', '--no-checkout', root, src], scratch);
    step('git checkout', 'git', ['-C', src, 'checkout', '--quiet', '--detach', commit], scratch);
    step('npm ci', 'npm', ['ci', '--no-audit', '--no-fund'], src);
    step('npm run image', 'npm', ['run', '--silent', 'image', '--', 'durable-csi'], src);
    const printed: unknown = JSON.parse(
      step('npm run image -- --print', 'npm', ['run', '--silent', 'image', '--', '--print'], src),
    );
    const refs = Object.keys(printed as object).filter((ref) => /\/durable-csi:[^/]+$/.test(ref));
    const ref = refs[0];
    const built = ref ? (printed as Record<string, string>)[ref] : undefined;
    if (!ref || !built || !fs.existsSync(built))
      throw new Error(`building ${tag}: no driver image in ${JSON.stringify(printed)}`);
    fs.mkdirSync(dir, { recursive: true });
    const tar = path.join(dir, 'durable-csi.tar');
    fs.linkSync(built, tar);
    const deployDir = path.join(dir, 'deploy');
    fs.cpSync(path.join(src, 'deploy'), deployDir, { recursive: true });
    const release: Release = { tag, commit, ref, tar, deployDir };
    fs.writeFileSync(done, `${JSON.stringify(release, null, 2)}\n`);
    return release;
  } finally {
    fs.rmSync(scratch, { recursive: true, force: true });
  }
}

/** The release the upgrade starts from and the downgrade returns to (test/e2e-cluster/upgrade.test.ts). */
export const UPGRADE_FROM = 'v0.2.0';

/**
 * Each release's commit, for a clone made without its tags (a clone of one branch, or a CI checkout that fetches
 * none): the upgrade runs in `npm test`, and a missing tag must not fail it when the commit is there. A release
 * commit never changes; a tag that names another commit is refused rather than trusted.
 */
const RELEASE_COMMITS: Record<string, string> = { 'v0.2.0': 'fbdc33a73cab580c4b07dc16dc4f8603c4915bb2' };

/** The commit of the release `tag` in the repository at `root`: its tag's, or the table's when the clone has no tags. */
export function releaseCommit(root: string, tag: string): string {
  const git = (args: string[]) =>
    execFileSync('git', ['-C', root, ...args], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  const pinned = RELEASE_COMMITS[tag];
  let tagged: string | undefined;
  try {
    tagged = git(['rev-parse', '--verify', '--quiet', `refs/tags/${tag}^{commit}`]);
  } catch {
    tagged = undefined;
  }
  if (tagged && pinned && tagged !== pinned)
    throw new Error(`the tag ${tag} names ${tagged}, but the release ${tag} is ${pinned}: fix the tag, or this table`);
  const commit = tagged ?? pinned;
  if (!commit) throw new Error(`no tag ${tag} in ${root} and no known commit for it: run \`git fetch --tags\``);
  try {
    git(['cat-file', '-e', `${commit}^{commit}`]);
  } catch {
    throw new Error(
      `the release ${tag} (${commit}) is not in ${root}: a shallow clone? run \`git fetch --unshallow --tags\``,
    );
  }
  return commit;
}

/** npm run image's cache (scripts/image/cache.js). */
function imagesCache(): string {
  if (process.env.DURABLE_CSI_IMAGES) return path.resolve(process.env.DURABLE_CSI_IMAGES);
  return path.join(process.env.XDG_CACHE_HOME ?? path.join(os.homedir(), '.cache'), 'durable-csi', 'images');
}

function releasesCache(): string {
  if (process.env.DURABLE_CSI_RELEASES) return path.resolve(process.env.DURABLE_CSI_RELEASES);
  return path.join(process.env.XDG_CACHE_HOME ?? path.join(os.homedir(), '.cache'), 'durable-csi', 'releases');
}

// `node dist/test/e2e-node/release.js [TAG...]` builds each release (UPGRADE_FROM by default), or finds it built:
// scripts/background-build.js runs it before the cluster's phase of `npm test`, so that the phase does not wait on it.
if (require.main === module) {
  const tags = process.argv.slice(2);
  for (const tag of tags.length > 0 ? tags : [UPGRADE_FROM]) {
    const release = releaseBuild(tag);
    console.log(`${release.tag} (${release.commit}): ${release.ref}, ${release.tar}`);
  }
}
