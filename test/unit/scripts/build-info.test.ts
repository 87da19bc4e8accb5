import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

interface BuildInfo {
  describeBuild(dir: string): { version: string; commit?: string; release: boolean };
  newestRelease(dir?: string): string;
}
const { describeBuild, newestRelease } = jest.requireActual<BuildInfo>('../../../scripts/build-info');
const ROOT = path.resolve(__dirname, '../../..');

/** Only a clean checkout of a commit whose package.json has no pre-release part is named by the bare version. */
describe('scripts/build-info.js', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dcsi-build-info-'));
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));
  const git = (...args: string[]) =>
    execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@t', ...args], { cwd: dir, encoding: 'utf8' }).trim();
  const commit = (version: string) => {
    fs.writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ name: 'durable-csi', version }));
    git('add', 'package.json');
    git('commit', '-q', '-m', version);
    return git('rev-parse', 'HEAD');
  };

  it('is never a release outside a git checkout', () => {
    fs.writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ name: 'durable-csi', version: '0.2.0' }));
    expect(describeBuild(dir)).toEqual({ version: '0.2.0-dev.unknown', commit: undefined, release: false });
  });

  it('names the release commit by its version, and a change to it as a dirty dev build', () => {
    git('init', '-q');
    const sha = commit('0.2.0');
    expect(describeBuild(dir)).toEqual({ version: '0.2.0', commit: sha, release: true });
    fs.writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ name: 'durable-csi', version: '0.2.0', x: 1 }));
    expect(describeBuild(dir).version).toBe(`0.2.0-dev.${sha.slice(0, 12)}.dirty`);
  });

  it('carries the commit on every build of a -dev version', () => {
    const sha = commit('0.3.0-dev');
    expect(describeBuild(dir)).toEqual({ version: `0.3.0-dev.${sha.slice(0, 12)}`, commit: sha, release: false });
  });
});

/**
 * This repository's version and CHANGELOG.md agree: a release commit (package.json X.Y.Z) has its entry, the newest;
 * between releases (X.Y.Z-dev) the version is past the newest entry. So no release goes out without its entry, and
 * no -dev version names one already released.
 */
describe("package.json's version and CHANGELOG.md", () => {
  const parts = (version: string) => version.split('.').map(Number);
  const after = (a: string, b: string) => {
    const [x, y] = [parts(a), parts(b)];
    for (let i = 0; i < 3; i++) if (x[i] !== y[i]) return (x[i] as number) > (y[i] as number);
    return false;
  };
  const { version } = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version: string };

  it('a release is the newest entry; a -dev version comes after it', () => {
    const [base, pre] = version.split('-');
    if (pre === undefined) expect(newestRelease(ROOT)).toBe(version);
    else {
      expect(pre).toBe('dev');
      expect(after(base as string, newestRelease(ROOT))).toBe(true);
    }
  });

  it('fails loudly on a CHANGELOG.md without a release heading', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dcsi-changelog-'));
    try {
      fs.writeFileSync(path.join(dir, 'CHANGELOG.md'), '# Changelog\n\n## Unreleased\n');
      expect(() => newestRelease(dir)).toThrow(/no release heading/);
      fs.writeFileSync(path.join(dir, 'CHANGELOG.md'), '## 0.3.0 (2027-01-02)\n\n## 0.2.0 (2026-12-05)\n');
      expect(newestRelease(dir)).toBe('0.3.0');
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
