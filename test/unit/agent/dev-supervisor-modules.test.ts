import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { findProjectRoot } from '../../../common/project-root';

/**
 * The dev stack's supervisor holds only what supervising needs: the Temporal client (gRPC and the API's protobuf
 * definitions) and the CSI client cost it about 40 MiB of its 90 (docs/performance.md, round 4). Checked on the build.
 */
describe("the dev supervisor's modules", () => {
  it('loading the dev stack loads neither the Temporal client nor gRPC', () => {
    const devStack = path.join(findProjectRoot(), 'dist', 'agent', 'dev-stack.js');
    const script =
      `require(${JSON.stringify(devStack)});` +
      'const loaded = Object.keys(require.cache).filter((file) => /@temporalio[\\\\/]client|@grpc[\\\\/]grpc-js|protobufjs/.test(file));' +
      'process.stdout.write(JSON.stringify(loaded.slice(0, 5)));';
    const loaded = JSON.parse(execFileSync(process.execPath, ['-e', script], { encoding: 'utf8' })) as string[];
    expect(loaded).toEqual([]);
  });
});
