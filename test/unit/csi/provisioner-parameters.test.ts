import { checkParameters } from '../../../csi/validate-create';

describe('parameters external-provisioner sends', () => {
  it('accepts csi.storage.k8s.io/fstype, which GetCapacity receives with the StorageClass parameters', () => {
    const parameters = { 'csi.storage.k8s.io/fstype': 'xfs' };
    expect(checkParameters(parameters)).toEqual(parameters);
  });

  it('still refuses other csi.storage.k8s.io keys it does not know', () => {
    expect(() => checkParameters({ 'csi.storage.k8s.io/colour': 'blue' })).toThrow(/unknown parameter/);
  });
});
