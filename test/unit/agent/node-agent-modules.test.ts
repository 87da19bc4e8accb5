import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { findProjectRoot } from '../../../common/project-root';

/**
 * The node agent holds what it uses (issue 38: within 10 MiB of an activity-only worker). @grpc/proto-loader loaded
 * protobufjs's descriptor extension and a second copy of the CSI proto's reflection, about 4 MB of heap that nothing
 * read (csi/proto.ts builds the same definitions itself). Checked on the build, as the agent runs it.
 */
describe("the node agent's modules", () => {
  it('loading the node agent and its command loads no @grpc/proto-loader, and serving CSI builds no descriptors', () => {
    const root = findProjectRoot();
    const script =
      `require(${JSON.stringify(path.join(root, 'dist', 'cli', 'node-command.js'))});` +
      `require(${JSON.stringify(path.join(root, 'dist', 'csi', 'proto.js'))}).csiPackage();` +
      'const loaded = Object.keys(require.cache).filter((file) => /proto-loader|protobufjs[\\\\/]ext[\\\\/]descriptor/.test(file));' +
      'process.stdout.write(JSON.stringify(loaded.slice(0, 5)));';
    const loaded = JSON.parse(execFileSync(process.execPath, ['-e', script], { encoding: 'utf8' })) as string[];
    expect(loaded).toEqual([]);
  });
});
