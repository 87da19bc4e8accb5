import { OPERATION_WORKFLOW_TYPES } from '../../../common/names';
import { operationName } from '../../../operations/pending-operations';

describe('the operation names operators read', () => {
  it('name each operation type, snapshots as snapshot-create and snapshot-delete, groups as group-snapshot-*', () => {
    expect(OPERATION_WORKFLOW_TYPES.map((type) => operationName(type, undefined))).toEqual([
      'create',
      'delete',
      'expand',
      'snapshot-create',
      'snapshot-delete',
      'group-snapshot-create',
      'group-snapshot-delete',
      'move',
      'snapshot-move',
    ]);
  });

  it('read the snapshot runs of earlier builds, whose attribute said otherwise, the same', () => {
    expect(operationName('createSnapshot', 'snapshot')).toBe('snapshot-create');
    expect(operationName('deleteSnapshot', 'delete-snapshot')).toBe('snapshot-delete');
    expect(operationName('someOtherWorkflow', 'other')).toBe('other');
    expect(operationName('someOtherWorkflow', undefined)).toBe('someOtherWorkflow');
  });
});
