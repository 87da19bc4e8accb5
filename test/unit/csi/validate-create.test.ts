import { FailureType } from '../../../common/failures';
import { TOPOLOGY_NODE_KEY } from '../../../common/names';
import type {
  CreateVolumeRequest,
  CreateVolumeRequest__Output,
} from '../../../csi/generated/csi/v1/CreateVolumeRequest';
import type { VolumeCapability__Output } from '../../../csi/generated/csi/v1/VolumeCapability';
import { csiPackage } from '../../../csi/proto';
import {
  DEFAULT_VOLUME_BYTES,
  MAX_NAME_LENGTH,
  checkName,
  toBytes,
  validateCreate,
} from '../../../csi/validate-create';
import type { CreateLimits } from '../../../csi/validate-create';
import { expectDriverError } from '../../support/driver-error';

const MI = 1024 ** 2;
const GI = 1024 ** 3;
const LIMITS: CreateLimits = { maxVolumeBytes: 100 * GI };

const MOUNT: VolumeCapability__Output = {
  mount: { fs_type: '', mount_flags: [], volume_mount_group: '' },
  access_mode: { mode: 'SINGLE_NODE_WRITER' },
  access_type: 'mount',
};
const BLOCK: VolumeCapability__Output = {
  block: {},
  access_mode: { mode: 'SINGLE_NODE_WRITER' },
  access_type: 'block',
};

/** A request as proto-loader decodes it (defaults: true, longs: String, enums: String, oneofs: true). */
function request(overrides: Partial<CreateVolumeRequest__Output> = {}): CreateVolumeRequest__Output {
  return {
    name: 'pvc-0001',
    capacity_range: null,
    volume_capabilities: [MOUNT],
    parameters: {},
    secrets: {},
    volume_content_source: null,
    accessibility_requirements: null,
    mutable_parameters: {},
    ...overrides,
  };
}

function range(required_bytes: string, limit_bytes: string): Partial<CreateVolumeRequest__Output> {
  return { capacity_range: { required_bytes, limit_bytes } };
}

function onNodes(...nodeIds: string[]) {
  return nodeIds.map((nodeId) => ({ segments: { [TOPOLOGY_NODE_KEY]: nodeId } }));
}

/** Encodes a request with the real CSI proto and decodes it the way the gRPC server does. */
function overTheWire(message: CreateVolumeRequest): CreateVolumeRequest__Output {
  const method = csiPackage().Controller.service.CreateVolume;
  return method.requestDeserialize(method.requestSerialize(message));
}

describe('validateCreate', () => {
  describe('capacity', () => {
    it('defaults to 1Gi when there is no capacity range', () => {
      expect(DEFAULT_VOLUME_BYTES).toBe(GI);
      expect(validateCreate(request(), LIMITS)).toMatchObject({ capacityBytes: GI, requiredBytes: 0, limitBytes: 0 });
    });

    it('defaults to 1Gi when both bounds are zero', () => {
      expect(validateCreate(request(range('0', '0')), LIMITS)).toMatchObject({ capacityBytes: GI });
    });

    it('uses required_bytes when given', () => {
      expect(validateCreate(request(range(String(5 * GI), '0')), LIMITS)).toMatchObject({
        capacityBytes: 5 * GI,
        requiredBytes: 5 * GI,
        limitBytes: 0,
      });
    });

    it('uses required_bytes when a higher limit is also given', () => {
      expect(validateCreate(request(range(String(2 * GI), String(8 * GI))), LIMITS)).toMatchObject({
        capacityBytes: 2 * GI,
        requiredBytes: 2 * GI,
        limitBytes: 8 * GI,
      });
    });

    it('accepts required equal to limit', () => {
      expect(validateCreate(request(range(String(3 * GI), String(3 * GI))), LIMITS).capacityBytes).toBe(3 * GI);
    });

    it('with only a limit below 1Gi, creates a volume of exactly the limit', () => {
      expect(validateCreate(request(range('0', String(512 * MI))), LIMITS)).toMatchObject({
        capacityBytes: 512 * MI,
        requiredBytes: 0,
        limitBytes: 512 * MI,
      });
    });

    it('with only a limit above 1Gi, creates the 1Gi default', () => {
      expect(validateCreate(request(range('0', String(50 * GI))), LIMITS).capacityBytes).toBe(GI);
    });

    it('accepts a volume of exactly maxVolumeBytes', () => {
      expect(validateCreate(request(range(String(100 * GI), '0')), LIMITS).capacityBytes).toBe(100 * GI);
    });

    it('refuses required_bytes above maxVolumeBytes as OutOfRange', () => {
      expectDriverError(
        () => validateCreate(request(range(String(100 * GI + 1), '0')), LIMITS),
        FailureType.OutOfRange,
        /exceeds the largest volume this driver creates \(100Gi\)/,
      );
    });

    it('refuses limit_bytes below required_bytes as InvalidArgument', () => {
      expectDriverError(
        () => validateCreate(request(range(String(2 * GI), String(GI))), LIMITS),
        FailureType.InvalidArgument,
        /limit_bytes \(1073741824\) is below required_bytes \(2147483648\)/,
      );
    });

    it('refuses a limit just one byte below required_bytes', () => {
      expectDriverError(
        () => validateCreate(request(range('1000', '999')), LIMITS),
        FailureType.InvalidArgument,
        /limit_bytes \(999\) is below required_bytes \(1000\)/,
      );
    });

    it.each<string>(['1.5', 'abc', '1e9', ' 10', '10 ', '0x10', '+5', '1Gi'])(
      'refuses required_bytes %j as InvalidArgument',
      (value) => {
        expectDriverError(
          () => validateCreate(request(range(value, '0')), LIMITS),
          FailureType.InvalidArgument,
          /capacity_range\.required_bytes is not an integer/,
        );
      },
    );

    it('refuses a non-integer limit_bytes as InvalidArgument', () => {
      expectDriverError(
        () => validateCreate(request(range('0', '2.5')), LIMITS),
        FailureType.InvalidArgument,
        /capacity_range\.limit_bytes is not an integer/,
      );
    });

    it('refuses negative sizes as InvalidArgument', () => {
      expectDriverError(
        () => validateCreate(request(range('-1', '0')), LIMITS),
        FailureType.InvalidArgument,
        /required_bytes must not be negative/,
      );
      expectDriverError(
        () => validateCreate(request(range('0', '-1')), LIMITS),
        FailureType.InvalidArgument,
        /limit_bytes must not be negative/,
      );
    });

    it('refuses a size beyond the safe integer range as OutOfRange', () => {
      expectDriverError(
        () => validateCreate(request(range('9007199254740993', '0')), LIMITS),
        FailureType.OutOfRange,
        /too large/,
      );
    });
  });

  describe('toBytes', () => {
    it('reads missing and empty values as zero and decimal strings as numbers', () => {
      expect(toBytes(undefined, 'required_bytes')).toBe(0);
      expect(toBytes('', 'required_bytes')).toBe(0);
      expect(toBytes('0', 'required_bytes')).toBe(0);
      expect(toBytes('1073741824', 'required_bytes')).toBe(GI);
      expect(toBytes(String(Number.MAX_SAFE_INTEGER), 'limit_bytes')).toBe(Number.MAX_SAFE_INTEGER);
    });
  });

  describe('name', () => {
    it(`accepts a name of ${MAX_NAME_LENGTH} characters`, () => {
      expect(MAX_NAME_LENGTH).toBe(253);
      const name = 'n'.repeat(253);
      expect(validateCreate(request({ name }), LIMITS).name).toBe(name);
    });

    it('refuses a name of 254 characters', () => {
      expectDriverError(
        () => validateCreate(request({ name: 'n'.repeat(254) }), LIMITS),
        FailureType.InvalidArgument,
        /longer than 253/,
      );
    });

    it('refuses an empty name', () => {
      expectDriverError(() => validateCreate(request({ name: '' }), LIMITS), FailureType.InvalidArgument, /required/);
    });

    it.each<string>(['a/b', '/', '..', 'a..b', '../etc'])('refuses %j', (name) => {
      expectDriverError(() => checkName(name), FailureType.InvalidArgument, /must not contain "\/" or "\.\."/);
    });

    it.each<[string, string]>([
      ['NUL', 'pvc\u0000x'],
      ['newline', 'pvc\nx'],
      ['tab', '\tpvc'],
      ['escape', 'pvc\u001b[31m'],
      ['unit separator', 'pvc\u001f'],
      ['DEL', 'pvc\u007f'],
    ])('refuses a name containing %s', (_label, name) => {
      expectDriverError(() => checkName(name), FailureType.InvalidArgument, /control characters/);
    });

    it.each<string>(['pvc-3f1c2d4e-aaaa-bbbb-cccc-444455556666', 'a.b', '.hidden', 'with space', 'ünïcode'])(
      'accepts %j',
      (name) => {
        expect(checkName(name)).toBe(name);
      },
    );
  });

  describe('other fields', () => {
    it('returns the access type of the capabilities', () => {
      expect(validateCreate(request(), LIMITS).accessType).toBe('mount');
      expect(validateCreate(request({ volume_capabilities: [BLOCK] }), LIMITS).accessType).toBe('block');
    });

    it('refuses missing capabilities', () => {
      expectDriverError(
        () => validateCreate(request({ volume_capabilities: [] }), LIMITS),
        FailureType.InvalidArgument,
        /volume_capabilities is required/,
      );
    });

    it('refuses mixing block and mount', () => {
      expectDriverError(
        () => validateCreate(request({ volume_capabilities: [MOUNT, BLOCK] }), LIMITS),
        FailureType.InvalidArgument,
        /mix block and mount/,
      );
    });

    it('keeps provisioner metadata parameters as a copy', () => {
      const parameters = { 'csi.storage.k8s.io/pvc/name': 'data', 'csi.storage.k8s.io/pvc/namespace': 'default' };
      const valid = validateCreate(request({ parameters }), LIMITS);
      expect(valid.parameters).toEqual(parameters);
      expect(valid.parameters).not.toBe(parameters);
    });

    it('refuses unknown parameters', () => {
      expectDriverError(
        () => validateCreate(request({ parameters: { colour: 'blue' } }), LIMITS),
        FailureType.InvalidArgument,
        /unknown parameter\(s\) colour/,
      );
    });

    it('refuses a volume content source', () => {
      const volume_content_source = { volume: { volume_id: 'v1' }, type: 'volume' as const };
      expectDriverError(
        () => validateCreate(request({ volume_content_source }), LIMITS),
        FailureType.InvalidArgument,
        /volume_content_source/,
      );
    });

    describe('with --snapshots', () => {
      const SNAPSHOTS = { ...LIMITS, snapshots: true };
      const KEY = 'a'.repeat(32);
      const snapshotId = `s1_node-7_0123456789abcdef_${KEY}`;
      const volumeId = `v1_node-7_0123456789abcdef_${KEY}`;
      const at = (nodeId: string) => ({ segments: { [TOPOLOGY_NODE_KEY]: nodeId } });

      it('places a restore or clone on the source node only, sized by the source when no size is required', () => {
        const restore = validateCreate(
          request({ volume_content_source: { snapshot: { snapshot_id: snapshotId }, type: 'snapshot' } }),
          SNAPSHOTS,
        );
        expect(restore).toMatchObject({
          contentSource: { snapshotId },
          requisite: ['node-7'],
          preferred: ['node-7'],
        });
        const clone = validateCreate(
          request({
            volume_content_source: { volume: { volume_id: volumeId }, type: 'volume' },
            capacity_range: { required_bytes: '0', limit_bytes: '0' },
            accessibility_requirements: { requisite: [at('node-7'), at('node-8')], preferred: [at('node-8')] },
          }),
          SNAPSHOTS,
        );
        expect(clone).toMatchObject({ contentSource: { volumeId }, requisite: ['node-7'], capacityBytes: 0 });
      });

      it('answers a requisite topology without the source node RESOURCE_EXHAUSTED, naming both', () => {
        expectDriverError(
          () =>
            validateCreate(
              request({
                volume_content_source: { snapshot: { snapshot_id: snapshotId }, type: 'snapshot' },
                accessibility_requirements: { requisite: [at('node-8')], preferred: [] },
              }),
              SNAPSHOTS,
            ),
          FailureType.ResourceExhausted,
          /the snapshot is on node node-7.*allows only node-8/,
        );
      });

      it('answers a source this driver could not have issued NOT_FOUND', () => {
        for (const volume_content_source of [
          { snapshot: { snapshot_id: 'snap-1' }, type: 'snapshot' as const },
          { snapshot: { snapshot_id: volumeId }, type: 'snapshot' as const },
          { volume: { volume_id: snapshotId }, type: 'volume' as const },
        ]) {
          expectDriverError(
            () => validateCreate(request({ volume_content_source }), SNAPSHOTS),
            FailureType.NotFound,
            /was not issued by this driver/,
          );
        }
      });
    });

    it('refuses mutable parameters', () => {
      expectDriverError(
        () => validateCreate(request({ mutable_parameters: { iops: '100' } }), LIMITS),
        FailureType.InvalidArgument,
        /mutable_parameters/,
      );
    });
  });

  describe('topology', () => {
    it('leaves requisite undefined and preferred empty without accessibility requirements', () => {
      const valid = validateCreate(request(), LIMITS);
      expect(valid.requisite).toBeUndefined();
      expect(valid.preferred).toEqual([]);
    });

    it('treats an empty requisite list as no restriction', () => {
      const valid = validateCreate(request({ accessibility_requirements: { requisite: [], preferred: [] } }), LIMITS);
      expect(valid.requisite).toBeUndefined();
      expect(valid.preferred).toEqual([]);
    });

    it('reduces requisite and preferred topologies to node IDs, keeping their order', () => {
      const accessibility_requirements = { requisite: onNodes('n1', 'n2', 'n3'), preferred: onNodes('n3', 'n1') };
      const valid = validateCreate(request({ accessibility_requirements }), LIMITS);
      expect(valid.requisite).toEqual(['n1', 'n2', 'n3']);
      expect(valid.preferred).toEqual(['n3', 'n1']);
    });

    it('refuses a requisite topology with a foreign key', () => {
      const accessibility_requirements = {
        requisite: [{ segments: { 'topology.kubernetes.io/zone': 'eu-west-1a' } }],
        preferred: [],
      };
      expectDriverError(
        () => validateCreate(request({ accessibility_requirements }), LIMITS),
        FailureType.InvalidArgument,
        /accessibility_requirements\.requisite: .*got topology\.kubernetes\.io\/zone/,
      );
    });

    it('refuses a preferred topology with a foreign key', () => {
      const accessibility_requirements = {
        requisite: onNodes('n1'),
        preferred: [{ segments: { 'other.driver/node': 'n1' } }],
      };
      expectDriverError(
        () => validateCreate(request({ accessibility_requirements }), LIMITS),
        FailureType.InvalidArgument,
        /accessibility_requirements\.preferred/,
      );
    });
  });

  describe('secrets', () => {
    it('never carries secrets into the result', () => {
      const valid = validateCreate(
        request({
          secrets: { password: 'hunter2', token: 's3cr3t-t0ken' },
          parameters: { 'csi.storage.k8s.io/pv/name': 'pv-1' },
        }),
        LIMITS,
      );
      expect(Object.keys(valid)).not.toContain('secrets');
      const text = JSON.stringify(valid);
      expect(text).not.toContain('hunter2');
      expect(text).not.toContain('s3cr3t-t0ken');
      expect(text).not.toContain('password');
    });
  });

  describe('filesystem type', () => {
    const mountWith = (fs_type: string) => [
      {
        mount: { fs_type, mount_flags: [], volume_mount_group: '' },
        block: null,
        access_mode: { mode: 'SINGLE_NODE_WRITER' as const },
        access_type: 'mount' as const,
      },
    ];
    it('comes from the capability or the fsType parameter', () => {
      expect(validateCreate(request({ volume_capabilities: mountWith('xfs') }), LIMITS).fsType).toBe('xfs');
      expect(validateCreate(request({ parameters: { fsType: 'xfs' } }), LIMITS).fsType).toBe('xfs');
    });
    it('refuses unknown and conflicting filesystems', () => {
      expectDriverError(
        () => validateCreate(request({ volume_capabilities: mountWith('btrfs') }), LIMITS),
        FailureType.InvalidArgument,
        /filesystem "btrfs" is not supported/,
      );
      expectDriverError(
        () =>
          validateCreate(request({ volume_capabilities: mountWith('ext4'), parameters: { fsType: 'xfs' } }), LIMITS),
        FailureType.InvalidArgument,
        /conflicting filesystem types/,
      );
    });
  });

  describe('a request decoded from the wire', () => {
    it('validates to the expected result', () => {
      const decoded = overTheWire({
        name: 'pvc-wire',
        capacity_range: { required_bytes: String(2 * GI) },
        volume_capabilities: [{ mount: { fs_type: 'ext4' }, access_mode: { mode: 'SINGLE_NODE_MULTI_WRITER' } }],
        secrets: { password: 'hunter2' },
        accessibility_requirements: { requisite: onNodes('n1', 'n2'), preferred: onNodes('n2') },
      });
      expect(validateCreate(decoded, LIMITS)).toEqual({
        name: 'pvc-wire',
        capacityBytes: 2 * GI,
        requiredBytes: 2 * GI,
        limitBytes: 0,
        parameters: {},
        accessType: 'mount',
        fsType: 'ext4',
        requisite: ['n1', 'n2'],
        preferred: ['n2'],
      });
    });

    it('defaults the size of a request with no capacity range', () => {
      const decoded = overTheWire({
        name: 'pvc-wire',
        volume_capabilities: [{ block: {}, access_mode: { mode: 'SINGLE_NODE_WRITER' } }],
      });
      expect(validateCreate(decoded, LIMITS)).toMatchObject({ capacityBytes: GI, accessType: 'block' });
    });

    it('refuses a multi-node access mode', () => {
      const decoded = overTheWire({
        name: 'pvc-wire',
        volume_capabilities: [{ mount: {}, access_mode: { mode: 'MULTI_NODE_MULTI_WRITER' } }],
      });
      expectDriverError(() => validateCreate(decoded, LIMITS), FailureType.InvalidArgument, /MULTI_NODE_MULTI_WRITER/);
    });
  });
});
