/**
 * The flags of a node agent whose pool is a plain directory: the dev stack, test/support, the soak and any test
 * that starts `durable-csi node` itself. Such a directory (under /tmp, a data dir) has no project quotas, so the
 * dir backend runs with `--dir-quota=none` (sizes reserved, not enforced) instead of refusing to start. The loop
 * backend ignores the flag. Deployed nodes keep the default, `project` (docs/storage.md).
 */
export const DEV_NODE_FLAGS: readonly string[] = ['--dir-quota', 'none'];
