/**
 * The mount options a StorageClass (mountOptions) or a PV may ask for. The node agent mounts as root in a
 * privileged container, so an option is allowed only when it is known to be harmless: what ext4 and xfs users
 * tune (atime, discard, commit interval, journaling mode, allocation), never what hands a Pod more power (`dev`,
 * `suid`: the driver mounts nodev,nosuid) or lets one take the node down (`errors=panic`), nor anything the kernel
 * might read as a path or a device (`journal_path=`, `logdev=`, `context=`).
 */
/**
 * The per-mount flags: a bind remount applies them, so they are all a dir volume (a directory bind-mounted, not a
 * filesystem of its own) can carry. The rest belong to a filesystem's superblock and would be silently ignored.
 */
const PER_MOUNT = [
  'noatime',
  'nodiratime',
  'relatime',
  'norelatime',
  'strictatime',
  'noexec',
  'exec',
  'nosuid',
  'nodev',
  'ro',
  'rw',
];
const BIND_OPTIONS = new Set(PER_MOUNT);

const PLAIN = new Set([
  // atime, exec, ro/rw: any filesystem, and a bind mount too
  ...PER_MOUNT,
  // write behaviour, any filesystem
  'lazytime',
  'nolazytime',
  'sync',
  'async',
  'dirsync',
  // ext4 and xfs
  'discard',
  'nodiscard',
  // ext4
  'barrier',
  'auto_da_alloc',
  'noauto_da_alloc',
  'delalloc',
  'nodelalloc',
  'dioread_nolock',
  'dioread_lock',
  'journal_checksum',
  'nojournal_checksum',
  'init_itable',
  'noinit_itable',
  'nombcache',
  // xfs
  'inode64',
  'inode32',
  'largeio',
  'nolargeio',
  'swalloc',
  'noquota',
]);

const VALUED: [RegExp, string][] = [
  [/^commit=\d{1,3}$/, 'commit=SECONDS'],
  [/^data=(ordered|writeback|journal)$/, 'data=ordered|writeback|journal'],
  [/^errors=(remount-ro|continue)$/, 'errors=remount-ro|continue'],
  [/^barrier=[01]$/, 'barrier=0|1'],
  [/^allocsize=\d+[kmg]?$/i, 'allocsize=SIZE'],
  [/^logbufs=\d$/, 'logbufs=N'],
  [/^logbsize=\d+[k]?$/i, 'logbsize=SIZE'],
];

const DRIVER_DEFAULTS: Record<string, string> = {
  dev: 'the driver mounts every volume nodev: device files on a volume must not open host devices',
  suid: 'the driver mounts every volume nosuid: a set-user-ID file on a volume must not run as root',
};

/**
 * Undefined when the option is allowed; otherwise why not, naming the option. bindOnly: the volume is a directory
 * bind-mounted (dir backend), so only the per-mount flags apply.
 */
export function refuseMountOption(option: string, bindOnly = false): string | undefined {
  if (bindOnly && !BIND_OPTIONS.has(option) && !DRIVER_DEFAULTS[option])
    return (
      `mount option "${option}" applies to a filesystem, and a dir volume is a directory bind-mounted: ` +
      `it can carry ${[...BIND_OPTIONS].join(', ')}`
    );
  if (PLAIN.has(option) || VALUED.some(([pattern]) => pattern.test(option))) return undefined;
  const reason = DRIVER_DEFAULTS[option];
  if (reason) return `mount option "${option}" is not allowed: ${reason}`;
  return (
    `mount option "${option}" is not among the options durable-csi allows: ` +
    `${[...PLAIN, ...VALUED.map(([, shown]) => shown)].join(', ')}`
  );
}
