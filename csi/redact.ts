/**
 * The one place secrets are removed. Every CSI field that carries secrets is named `secrets` (see the
 * `// secret` marks in csi.proto), so a request is safe to log or to pass on once those values are masked.
 */
const MASK = '***';

export function redactSecrets<T>(value: T): T {
  if (Array.isArray(value)) return value.map((item: unknown) => redactSecrets(item)) as T;
  if (value === null || typeof value !== 'object' || Buffer.isBuffer(value)) return value;
  const copy: Record<string, unknown> = {};
  for (const [key, field] of Object.entries(value as Record<string, unknown>)) {
    copy[key] = key === 'secrets' && field && typeof field === 'object' ? maskValues(field) : redactSecrets(field);
  }
  return copy as T;
}

function maskValues(secrets: object): Record<string, string> {
  return Object.fromEntries(Object.keys(secrets).map((key) => [key, MASK]));
}
