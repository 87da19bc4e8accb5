import { bundleWorkflowCode, DefaultLogger } from '@temporalio/worker';
import fs from 'node:fs';
import path from 'node:path';

/**
 * Bundles the workflow code once at build time (dist/workflow-bundle.js), so a controller starts in a second
 * instead of running webpack at every start.
 */
export const WORKFLOW_BUNDLE_PATH = path.join(__dirname, '..', 'workflow-bundle.js');
export const WORKFLOWS_PATH = require.resolve('../workflows');

async function main(): Promise<void> {
  const { code } = await bundleWorkflowCode({ workflowsPath: WORKFLOWS_PATH, logger: new DefaultLogger('WARN') });
  fs.writeFileSync(WORKFLOW_BUNDLE_PATH, code);
  process.stdout.write(`workflow bundle written to ${WORKFLOW_BUNDLE_PATH} (${code.length} bytes)\n`);
}

if (require.main === module) {
  main().catch((error: unknown) => {
    process.stderr.write(`${String(error)}\n`);
    process.exit(1);
  });
}
