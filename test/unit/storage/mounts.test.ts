import { majorMinorOf, parseMountInfoLine, showsVolume } from '../../../storage/host/mounts';

describe('parseMountInfoLine', () => {
  it('reads the fields around the optional ones, and unescapes paths', () => {
    const line =
      '36 35 7:3 /sub\\040dir /var/lib/kubelet/pods/a\\040b/mount ro,relatime shared:1 master:2 - ext4 /dev/loop3 rw';
    expect(parseMountInfoLine(line)).toEqual({
      majorMinor: '7:3',
      root: '/sub dir',
      mountPoint: '/var/lib/kubelet/pods/a b/mount',
      readonly: true,
      fsType: 'ext4',
      source: '/dev/loop3',
      superOptions: ['rw'],
    });
    expect(parseMountInfoLine('')).toBeUndefined();
    expect(parseMountInfoLine('1 2 3:4 / /x rw')).toBeUndefined();
  });
});

describe('majorMinorOf', () => {
  it('decodes Linux dev_t, large minors included', () => {
    expect(majorMinorOf(0x0700n)).toBe('7:0');
    expect(majorMinorOf(0xfe01n)).toBe('254:1');
    expect(majorMinorOf((259n << 8n) | 0x05n | ((0x123n << 12n) * 0x100n))).toBe(`259:${0x12305}`);
  });
});

describe('showsVolume', () => {
  const entry = {
    majorMinor: '254:0',
    root: '/pool/volumes/k',
    mountPoint: '/t',
    readonly: false,
    fsType: 'ext4',
    source: '/dev/vda',
    superOptions: ['rw'],
  };
  it('matches the filesystem, and the path inside it when one is given', () => {
    expect(showsVolume(entry, [{ majorMinor: '254:0', root: '/pool/volumes/k' }])).toBe(true);
    expect(showsVolume(entry, [{ majorMinor: '254:0', root: '/pool/volumes/j' }])).toBe(false);
    expect(showsVolume(entry, [{ majorMinor: '254:0' }])).toBe(true);
    expect(showsVolume(entry, [{ majorMinor: '7:0' }])).toBe(false);
  });
});
