import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

interface BuildInfo {
  describeBuild(dir: string): { version: string; commit?: string; release: boolean };
}
const { describeBuild } = jest.requireActual<BuildInfo>('../../../scripts/build-info');

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
