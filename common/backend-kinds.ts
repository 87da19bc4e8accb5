/** What each node storage backend can serve; the controller places volumes by it. No Node built-ins. */
export const BACKEND_KINDS = ['dir', 'loop'] as const;
export type BackendKind = (typeof BACKEND_KINDS)[number];

/** A dir volume is a directory: it has no block device to hand over. */
export function supportsBlock(backend: string): boolean {
  return backend === 'loop';
}
