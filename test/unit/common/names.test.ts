import {
  OPERATION_WORKFLOW_TYPES,
  expandWorkflowId,
  inspectWorkflowId,
  listWorkflowId,
  moveWorkflowId,
  movedObjectName,
  oneOffTag,
  operationTypesClause,
} from '../../../common/names';

describe('workflow names', () => {
  it('selects exactly the three volume operations in visibility', () => {
    expect(OPERATION_WORKFLOW_TYPES).toEqual([
      'createVolume',
      'deleteVolume',
      'expandVolume',
      'createSnapshot',
      'deleteSnapshot',
      'createVolumeGroupSnapshot',
      'deleteVolumeGroupSnapshot',
      'moveVolume',
      'moveSnapshot',
    ]);
    expect(operationTypesClause()).toBe(
      'WorkflowType IN ("createVolume", "deleteVolume", "expandVolume", "createSnapshot", "deleteSnapshot", ' +
        '"createVolumeGroupSnapshot", "deleteVolumeGroupSnapshot", "moveVolume", "moveSnapshot")',
    );
  });

  it('gives an expansion one ID per target size, so a retry attaches and a larger request starts anew', () => {
    expect(expandWorkflowId('d.io', 'v1_n_p_k', 2048)).toBe('d.io/expand/v1_n_p_k/2048');
    expect(expandWorkflowId('d.io', 'v1_n_p_k', 4096)).not.toBe(expandWorkflowId('d.io', 'v1_n_p_k', 2048));
  });

  it('gives a move one ID per volume, so a second request for the volume attaches to the first', () => {
    expect(moveWorkflowId('d.io', 'v1_n_p_k')).toBe('d.io/move/v1_n_p_k');
  });

  it('keeps one-off reads apart by their tag', () => {
    const [a, b] = [oneOffTag(), oneOffTag()];
    expect(a).not.toBe(b);
    expect(inspectWorkflowId('d.io', 'v1_n_p_k', a)).toBe(`d.io/inspect/v1_n_p_k/${a}`);
    expect(listWorkflowId('d.io', a)).toBe(`d.io/list/${a}`);
  });
});

describe('movedObjectName', () => {
  it("marks the old PV's or content's name with the move, replaces an earlier mark, and keeps names short", () => {
    expect(movedObjectName('snapcontent-1', 'abcdef0123456789')).toBe('snapcontent-1-mabcdef01');
    expect(movedObjectName('snapcontent-1-mabcdef01', '0011223344556677')).toBe('snapcontent-1-m00112233');
    expect(movedObjectName('x'.repeat(253), 'abcdef0123456789')).toHaveLength(210);
  });
});
