/**
 * The HTTP status of a failed client-node call (ApiException.code), if any. A file of its own: client-node is an
 * ES module that jest cannot load, and what reads a status needs none of it.
 */
export function statusOf(error: unknown): number | undefined {
  const code = (error as { code?: unknown }).code;
  return typeof code === 'number' ? code : undefined;
}
