import { promises as fs } from 'node:fs';
import { loopAttachments } from '../../../storage/loop/loop-devices';

/**
 * sysfs as a node shared with other loop users shows it: a device detached between the directory listing and the
 * read of its backing file answers ENODEV (seen on this machine while another suite detached its devices). That
 * device backs nothing: the list goes on without it, where it used to fail the pool's open.
 */
describe('loopAttachments', () => {
  afterEach(() => jest.restoreAllMocks());

  it('skips a device detached while it is read, and still fails on any other error', async () => {
    const names = ['loop0', 'loop1', 'loop2'];
    jest.spyOn(fs, 'readdir').mockResolvedValue(names as never);
    const failures: Record<string, string | undefined> = { loop0: undefined, loop1: 'ENODEV', loop2: 'ENXIO' };
    const read = jest.spyOn(fs, 'readFile').mockImplementation(async (file) => {
      const name = String(file).split('/')[4]!;
      const code = failures[name];
      if (code) throw Object.assign(new Error(`${code}: read`), { code });
      return `/pool/${name}.img\n`;
    });
    expect(await loopAttachments()).toEqual([{ device: '/dev/loop0', file: '/pool/loop0.img' }]);

    failures.loop1 = 'EACCES';
    await expect(loopAttachments()).rejects.toThrow('EACCES');
    expect(read).toHaveBeenCalledWith('/sys/class/block/loop1/loop/backing_file', 'utf8');
  });
});
