import type { SuiteDriver } from './run-suite';

/**
 * What each driver YAML runs. `npm test` (CI) runs every External.Storage spec for loop ext4 (the class users will
 * run most; its YAML declares block, so raw block on loop runs there too) and, for xfs and dir, the test suites
 * where a filesystem of their own (or none) makes a difference. DURABLE_CSI_STORAGE_SUITE=full (`npm run
 * test:storage-suite`) runs every spec for every class.
 */
const EVERYTHING = 'External.Storage';

/** Suites whose outcome depends on the filesystem: mounting, data, ownership, subPath, growth, capacity. */
const FILESYSTEM_SUITES = [
  'provisioning',
  'volumes',
  'volumeIO',
  'subPath',
  'fsgroupchangepolicy',
  'volume-expand',
  'capacity',
  'volumeMode',
];

const CI_FOCUS: Record<SuiteDriver, string> = {
  'loop-ext4': EVERYTHING,
  'loop-xfs': suites(FILESYSTEM_SUITES),
  dir: suites(FILESYSTEM_SUITES),
};

function suites(names: string[]): string {
  return `${EVERYTHING}.*\\] (${names.join('|')}) `;
}

export function fullRun(): boolean {
  return process.env.DURABLE_CSI_STORAGE_SUITE === 'full';
}

/** DURABLE_CSI_STORAGE_SUITE_FOCUS narrows a run by hand (to replay one spec); CI never sets it. */
export function focusFor(driver: SuiteDriver): string {
  const narrowed = process.env.DURABLE_CSI_STORAGE_SUITE_FOCUS;
  if (narrowed) return `${EVERYTHING}.*${narrowed}`;
  return fullRun() ? EVERYTHING : CI_FOCUS[driver];
}
