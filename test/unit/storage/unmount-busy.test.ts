import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { unmount } from '../../../storage/host/mounts';
import { releaseMountsUnder } from './mount-helpers';

/** umount on a real tmpfs kept busy by an open file: a short hold is waited out, a lasting one is an error. */
describe('unmount of a busy mount', () => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'dcsi-busy-'));
  const target = path.join(root, 'mnt');
  const isMounted = () =>
    fs
      .readFileSync('/proc/self/mountinfo', 'utf8')
      .split('\n')
      .some((line) => line.split(' ')[4] === target);

  beforeEach(() => {
    fs.mkdirSync(target, { recursive: true });
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', target]);
  });
  afterAll(() => {
    releaseMountsUnder(root);
    fs.rmSync(root, { recursive: true, force: true });
  });

  it('waits while something holds it for a moment, then unmounts', async () => {
    const held = fs.openSync(path.join(target, 'open-file'), 'w');
    setTimeout(() => fs.closeSync(held), 700);
    await unmount(target);
    expect(isMounted()).toBe(false);
  });

  it('fails, still mounted, when the hold lasts', async () => {
    const held = fs.openSync(path.join(target, 'open-file'), 'w');
    try {
      await expect(unmount(target)).rejects.toThrow(/target is busy/);
      expect(isMounted()).toBe(true);
    } finally {
      fs.closeSync(held);
    }
    await unmount(target);
    expect(isMounted()).toBe(false);
  });
});
