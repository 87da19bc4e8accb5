/** The driver configurations csi-sanity runs against: a backend and the access type of its test volumes. */

export type SanityConfigName = 'dir' | 'loop-mount' | 'loop-block';

export interface SanityConfig {
  name: SanityConfigName;
  backend: 'dir' | 'loop';
  accessType: 'mount' | 'block';
  /** The controller runs with --snapshots (docs/snapshots.md): the snapshot and clone specs run. */
  snapshots: boolean;
}

export const SANITY_CONFIGS: readonly SanityConfig[] = [
  { name: 'dir', backend: 'dir', accessType: 'mount', snapshots: true },
  { name: 'loop-mount', backend: 'loop', accessType: 'mount', snapshots: true },
  { name: 'loop-block', backend: 'loop', accessType: 'block', snapshots: true },
];

/**
 * The configurations to run: all of them, or those named in SANITY_CONFIGS (comma-separated, e.g. "dir" or
 * "dir,loop-mount"). An unknown name is an error, not an empty run.
 */
export function selectedConfigs(selection: string | undefined): SanityConfig[] {
  if (selection === undefined || selection.trim() === '' || selection.trim() === 'all') return [...SANITY_CONFIGS];
  const names = selection.split(',').map((name) => name.trim());
  return names.map((name) => {
    const config = SANITY_CONFIGS.find((candidate) => candidate.name === name);
    if (!config) {
      const known = SANITY_CONFIGS.map((candidate) => candidate.name).join(', ');
      throw new Error(`SANITY_CONFIGS names "${name}"; known configurations: ${known} (or "all")`);
    }
    return config;
  });
}
