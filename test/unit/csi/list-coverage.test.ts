import { Metadata } from '@grpc/grpc-js';
import { describeUnanswered } from '../../../cli/list-all-volumes';
import { listCoverageHeaders, readUnansweredNodes } from '../../../csi/list-coverage';

describe('ListVolumes coverage header', () => {
  it('carries the nodes that did not answer, and none when all did or the header is absent', () => {
    expect(readUnansweredNodes(listCoverageHeaders(['node-2', 'node-7']))).toEqual(['node-2', 'node-7']);
    expect(readUnansweredNodes(listCoverageHeaders([]))).toEqual([]);
    expect(readUnansweredNodes(new Metadata())).toEqual([]);
  });

  it('says which nodes are missing from the list, in the singular and plural', () => {
    expect(describeUnanswered([])).toBeUndefined();
    expect(describeUnanswered(['node-2'])).toBe('node node-2 did not answer: its volumes are missing from this list');
    expect(describeUnanswered(['node-2', 'node-3'])).toBe(
      'nodes node-2, node-3 did not answer: their volumes are missing from this list',
    );
  });
});
