/**
 * The `projectId` field of a record and an intent, as the pool checks it when it reads them back. Which ID a dir
 * volume gets, and what the filesystem does with it, is the dir backend's (storage/dir/project-quotas.ts).
 */

/** The highest project ID: below 2^31, for tools that read it signed. */
export const LAST_PROJECT_ID = 2 ** 31 - 1;

export function isProjectId(value: unknown): value is number {
  return Number.isInteger(value) && (value as number) >= 1 && (value as number) <= LAST_PROJECT_ID;
}
