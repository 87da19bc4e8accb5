import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { CLI_MAIN } from '../../agent/spawn-cli';
import { findProjectRoot } from '../../common/project-root';

/** A build of the driver the soak can start processes from: this tree's dist/, or an old revision's. */
export interface Build {
  label: 'new' | 'old';
  cliMain: string;
  /** The revision asked for and the commit it resolved to (old builds only). */
  rev?: string;
  sha?: string;
  /** `--help` of each subcommand, to leave out flags this build does not know. */
  help: { controller: string; node: string };
  /** The revision did not type-check; it was built from what tsc emitted anyway. */
  typeErrors?: boolean;
}

const ROOT = findProjectRoot();
const CACHE = path.join(ROOT, '.tools', 'soak-baseline');

function run(command: string, args: string[], cwd: string, log?: number): string {
  const result = spawnSync(command, args, {
    cwd,
    encoding: 'utf8',
    stdio: ['ignore', log ?? 'pipe', log ?? 'pipe'],
    maxBuffer: 64 * 1024 * 1024,
  });
  if (result.error) throw new Error(`${command} ${args.join(' ')}: ${result.error.message}`);
  if (result.status !== 0) {
    const output = log === undefined ? `${result.stderr}`.trim() : 'see the build log';
    throw new Error(`${command} ${args.join(' ')} exited with ${result.signal ?? result.status}: ${output}`);
  }
  return `${result.stdout ?? ''}`.trim();
}

function help(cliMain: string, command: string): string {
  return run(process.execPath, [cliMain, command, '--help'], path.dirname(cliMain));
}

/**
 * Whether a build's controller serves the snapshot service (`--snapshots` in its `controller --help`). Without it
 * adaptArgs leaves the flag out, the controller answers snapshot calls UNIMPLEMENTED, and the workload sends them
 * (and restores) only to the other controller.
 */
export function supportsSnapshots(build: Build | undefined): boolean {
  return build !== undefined && /(^|\s)--snapshots[\s,=<]/m.test(build.help.controller);
}

/**
 * Whether a build's controller serves the GroupController (group snapshots): `controller --help` says so under
 * `--snapshots` since the GroupController came (issue 37); 0.2.0 has none and answers the group calls UNIMPLEMENTED,
 * so the workload sends them only to controllers that serve it, as a snapshot sidecar beside an older controller
 * finds no group capability (faults/version-skew.ts asks an old controller to show it).
 */
export function supportsGroups(build: Build | undefined): boolean {
  return supportsSnapshots(build) && /GroupController/.test(build?.help.controller ?? '');
}

export function currentBuild(): Build {
  return {
    label: 'new',
    cliMain: CLI_MAIN,
    help: { controller: help(CLI_MAIN, 'controller'), node: help(CLI_MAIN, 'node') },
  };
}

/**
 * The commit of the newest release, from its CHANGELOG.md entry (`Release commit: \`<sha>\``, written by the commit
 * after the release, which is the first to know it), or undefined before any release names one.
 */
export function newestReleaseCommit(
  changelog = fs.readFileSync(path.join(ROOT, 'CHANGELOG.md'), 'utf8'),
): string | undefined {
  const entry = /^## \d+\.\d+\.\d+ \(.*$([\s\S]*?)(?=^## |(?![\s\S]))/m.exec(changelog);
  return entry ? /^Release commit: `([0-9a-f]{40})`/m.exec(entry[1] as string)?.[1] : undefined;
}

/**
 * The default baseline: the newest release's commit, so that every soak proves the upgrade from the release (the
 * compatibility promise, docs/releases.md); on that commit itself, or in a clone without it, where this branch left
 * main, or HEAD~5 when HEAD is main itself.
 */
export function defaultBaselineRev(): string {
  const head = run('git', ['rev-parse', 'HEAD'], ROOT);
  const release = newestReleaseCommit();
  if (release && release !== head) {
    try {
      run('git', ['merge-base', '--is-ancestor', release, 'HEAD'], ROOT);
      return release;
    } catch {
      process.stderr.write(`soak: the release commit ${release} is not in this clone's history; falling back\n`);
    }
  }
  try {
    const base = run('git', ['merge-base', 'HEAD', 'main'], ROOT);
    if (base !== head) return base;
  } catch {
    // no main branch: fall through
  }
  return existingAncestor(5);
}

/**
 * HEAD~n, or the oldest commit there is when the clone is shallower than that (CI may clone with little
 * history). Said out loud: a baseline too close to HEAD tests the rollout mechanics more than real skew.
 */
function existingAncestor(generations: number): string {
  for (let back = generations; back > 0; back--) {
    try {
      run('git', ['rev-parse', '--verify', `HEAD~${back}^{commit}`], ROOT);
      if (back < generations) {
        process.stderr.write(`soak: only ${back} earlier commits in this clone; the baseline is HEAD~${back}\n`);
      }
      return `HEAD~${back}`;
    } catch {
      // shallower than that: try a nearer ancestor
    }
  }
  process.stderr.write('soak: WARNING: a single-commit clone; the version-skew baseline is HEAD itself\n');
  return 'HEAD';
}

/**
 * Builds `rev` (git archive, npm ci, npm run build) into .tools/soak-baseline/<sha>, once: later runs reuse it.
 * Built in a temporary sibling and renamed into place, so an interrupted build is never mistaken for a good one.
 */
export function prepareBaseline(rev: string, progress: (message: string) => void): Build {
  const sha = run('git', ['rev-parse', '--verify', `${rev}^{commit}`], ROOT);
  const dir = path.join(CACHE, sha);
  const cliMain = path.join(dir, 'dist', 'cli', 'main.js');
  if (!fs.existsSync(path.join(dir, 'soak-baseline.json'))) {
    const building = `${dir}.tmp-${process.pid}`;
    fs.rmSync(building, { recursive: true, force: true });
    fs.mkdirSync(building, { recursive: true });
    const logFile = path.join(CACHE, `${sha}.build.log`);
    progress(`building baseline ${rev} (${sha.slice(0, 12)}) in ${building}; log: ${logFile}`);
    const log = fs.openSync(logFile, 'w');
    try {
      const archive = path.join(CACHE, `${sha}.tmp-${process.pid}.tar`);
      run('git', ['archive', '--format=tar', `--output=${archive}`, sha], ROOT);
      run('tar', ['-xf', archive, '-C', building], ROOT);
      fs.rmSync(archive);
      run('npm', ['ci', '--prefer-offline', '--no-audit', '--no-fund'], building, log);
      const typeErrors = build(building, log, progress);
      const stamp = { rev, sha, builtAt: new Date(), typeErrors };
      fs.writeFileSync(path.join(building, 'soak-baseline.json'), JSON.stringify(stamp));
      try {
        fs.renameSync(building, dir);
      } catch (error) {
        // Another run finished the same build first: use theirs.
        if (!fs.existsSync(path.join(dir, 'soak-baseline.json'))) throw error;
        fs.rmSync(building, { recursive: true, force: true });
      }
    } catch (error) {
      fs.rmSync(building, { recursive: true, force: true });
      throw error;
    } finally {
      fs.closeSync(log);
    }
  } else {
    progress(`using the cached baseline ${rev} (${sha.slice(0, 12)}) in ${dir}`);
  }
  const stampFile = path.join(dir, 'soak-baseline.json');
  const stamp = JSON.parse(fs.readFileSync(stampFile, 'utf8')) as { typeErrors?: boolean };
  const now = new Date();
  fs.utimesSync(stampFile, now, now);
  pruneCache(progress);
  return {
    label: 'old',
    cliMain,
    rev,
    sha,
    typeErrors: stamp.typeErrors === true,
    help: { controller: help(cliMain, 'controller'), node: help(cliMain, 'node') },
  };
}

/** Each cached baseline holds its own node_modules (about 0.5 GB): keep the most recently used few. */
function pruneCache(progress: (message: string) => void, keep = 3): void {
  const built = fs
    .readdirSync(CACHE)
    .filter((name) => /^[0-9a-f]{40}$/.test(name) && fs.existsSync(path.join(CACHE, name, 'soak-baseline.json')))
    .map((name) => ({ name, used: fs.statSync(path.join(CACHE, name, 'soak-baseline.json')).mtimeMs }))
    .sort((a, b) => b.used - a.used);
  for (const { name } of built.slice(keep)) {
    progress(`removing the cached baseline ${name.slice(0, 12)} (least recently used)`);
    fs.rmSync(path.join(CACHE, name), { recursive: true, force: true });
    fs.rmSync(path.join(CACHE, `${name}.build.log`), { force: true });
  }
}

/**
 * `npm run build`; when it fails (a work-in-progress revision that does not type-check), the same steps one by
 * one with tsc's output kept despite its errors, as long as the CLI and the workflow bundle come out of it.
 * Returns whether type errors were tolerated.
 */
function build(dir: string, log: number, progress: (message: string) => void): boolean {
  try {
    run('npm', ['run', 'build'], dir, log);
    return false;
  } catch (error) {
    progress(`baseline: ${String(error)}; building again step by step, keeping what tsc emits despite type errors`);
  }
  const scripts = (JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8')) as { scripts?: object }).scripts;
  if (scripts && 'gen:proto' in scripts) run('npm', ['run', 'gen:proto'], dir, log);
  try {
    run(path.join(dir, 'node_modules', '.bin', 'tsc'), ['-p', 'tsconfig.json'], dir, log);
  } catch {
    // emitted anyway (noEmitOnError is off); checked below
  }
  if (fs.existsSync(path.join(dir, 'scripts', 'copy-assets.js')))
    run(process.execPath, ['scripts/copy-assets.js'], dir, log);
  run(process.execPath, ['dist/agent/bundle-workflows.js'], dir, log);
  for (const file of ['dist/cli/main.js', 'dist/workflow-bundle.js']) {
    if (!fs.existsSync(path.join(dir, file))) throw new Error(`the baseline build produced no ${file}`);
  }
  return true;
}

/**
 * Leaves out the flags (and their values) that a build's --help does not list, so an older build still starts.
 * Returns what was dropped so the report can say how the command line was adapted.
 */
export function adaptArgs(build: Build, args: string[]): { args: string[]; dropped: string[] } {
  const [command, ...rest] = args;
  const text = command === 'controller' ? build.help.controller : build.help.node;
  const kept: string[] = command === undefined ? [] : [command];
  const dropped: string[] = [];
  for (let index = 0; index < rest.length; index++) {
    const token = rest[index] as string;
    const next = rest[index + 1];
    const takesValue = next !== undefined && !next.startsWith('--');
    const known = !token.startsWith('--') || new RegExp(`(^|\\s)${token}[\\s,=<]`, 'm').test(text);
    const group = takesValue ? [token, next] : [token];
    if (known) kept.push(...group);
    else dropped.push(group.join(' '));
    if (takesValue) index++;
  }
  return { args: kept, dropped };
}
