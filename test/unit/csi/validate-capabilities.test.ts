import { FailureType } from '../../../common/failures';
import type { VolumeCapability__Output } from '../../../csi/generated/csi/v1/VolumeCapability';
import { checkCapabilities } from '../../../csi/validate-create';
import { expectDriverError } from '../../support/driver-error';

type Mode = NonNullable<VolumeCapability__Output['access_mode']>['mode'];

function mount(mode: Mode): VolumeCapability__Output {
  return {
    mount: { fs_type: 'ext4', mount_flags: [], volume_mount_group: '' },
    access_mode: { mode },
    access_type: 'mount',
  };
}

function block(mode: Mode): VolumeCapability__Output {
  return { block: {}, access_mode: { mode }, access_type: 'block' };
}

const SINGLE_NODE: Mode[] = [
  'SINGLE_NODE_WRITER',
  'SINGLE_NODE_READER_ONLY',
  'SINGLE_NODE_SINGLE_WRITER',
  'SINGLE_NODE_MULTI_WRITER',
];
const MULTI_NODE: Mode[] = ['MULTI_NODE_READER_ONLY', 'MULTI_NODE_SINGLE_WRITER', 'MULTI_NODE_MULTI_WRITER'];

describe('checkCapabilities', () => {
  it.each(SINGLE_NODE)('accepts mount with %s', (mode) => {
    expect(checkCapabilities([mount(mode)])).toBe('mount');
  });

  it.each(SINGLE_NODE)('accepts block with %s', (mode) => {
    expect(checkCapabilities([block(mode)])).toBe('block');
  });

  it.each(MULTI_NODE)('refuses %s, naming it', (mode) => {
    expectDriverError(
      () => checkCapabilities([mount(mode)]),
      FailureType.InvalidArgument,
      new RegExp(`access mode ${mode} is not supported`),
    );
    expectDriverError(() => checkCapabilities([block(mode)]), FailureType.InvalidArgument, /single-node modes only/);
  });

  it('refuses UNKNOWN and a missing access mode', () => {
    expectDriverError(() => checkCapabilities([mount('UNKNOWN')]), FailureType.InvalidArgument, /UNKNOWN/);
    const noMode: VolumeCapability__Output = { ...mount('SINGLE_NODE_WRITER'), access_mode: null };
    expectDriverError(() => checkCapabilities([noMode]), FailureType.InvalidArgument, /access mode UNKNOWN/);
  });

  it('refuses a multi-node mode even next to a single-node one', () => {
    expectDriverError(
      () => checkCapabilities([mount('SINGLE_NODE_WRITER'), mount('MULTI_NODE_READER_ONLY')]),
      FailureType.InvalidArgument,
      /MULTI_NODE_READER_ONLY/,
    );
  });

  it('accepts several capabilities of the same access type', () => {
    expect(checkCapabilities([mount('SINGLE_NODE_WRITER'), mount('SINGLE_NODE_READER_ONLY')])).toBe('mount');
    expect(checkCapabilities([block('SINGLE_NODE_WRITER'), block('SINGLE_NODE_MULTI_WRITER')])).toBe('block');
  });

  it('refuses mixing block and mount, in either order', () => {
    expectDriverError(
      () => checkCapabilities([mount('SINGLE_NODE_WRITER'), block('SINGLE_NODE_WRITER')]),
      FailureType.InvalidArgument,
      /mix block and mount/,
    );
    expectDriverError(
      () => checkCapabilities([block('SINGLE_NODE_WRITER'), mount('SINGLE_NODE_WRITER')]),
      FailureType.InvalidArgument,
      /mix block and mount/,
    );
  });

  it('refuses an empty list', () => {
    expectDriverError(() => checkCapabilities([]), FailureType.InvalidArgument, /volume_capabilities is required/);
  });

  it('refuses a capability with neither block nor mount', () => {
    const neither: VolumeCapability__Output = { access_mode: { mode: 'SINGLE_NODE_WRITER' } };
    expectDriverError(() => checkCapabilities([neither]), FailureType.InvalidArgument, /needs an access type/);
    const nulls: VolumeCapability__Output = { block: null, mount: null, access_mode: { mode: 'SINGLE_NODE_WRITER' } };
    expectDriverError(() => checkCapabilities([nulls]), FailureType.InvalidArgument, /needs an access type/);
  });
});
