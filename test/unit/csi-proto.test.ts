import * as path from 'path';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import * as protobuf from 'protobufjs';
import { LOADER_OPTIONS } from '../../csi/proto';

// Guards csi/csi.proto against drifting from CSI spec v1.12.0 (wire numbers checked against
// container-storage-interface/spec tag v1.12.0, commit e6fc13ea4d529db12e211ef79c924ee3186c39d5).

const PROTO_PATH = path.join(__dirname, '..', '..', 'csi', 'csi.proto');

const EXPECTED_RPCS: Record<string, string[]> = {
  Identity: ['GetPluginInfo', 'GetPluginCapabilities', 'Probe'],
  Controller: [
    'CreateVolume',
    'DeleteVolume',
    'ControllerPublishVolume',
    'ControllerUnpublishVolume',
    'ValidateVolumeCapabilities',
    'ListVolumes',
    'GetCapacity',
    'ControllerGetCapabilities',
    'CreateSnapshot',
    'DeleteSnapshot',
    'ListSnapshots',
    'GetSnapshot',
    'ControllerExpandVolume',
    'ControllerGetVolume',
    'ControllerModifyVolume',
  ],
  Node: [
    'NodeStageVolume',
    'NodeUnstageVolume',
    'NodePublishVolume',
    'NodeUnpublishVolume',
    'NodeGetVolumeStats',
    'NodeExpandVolume',
    'NodeGetCapabilities',
    'NodeGetInfo',
  ],
};

// [message, field, number] — taken from the upstream spec, not from our file.
const FIELD_NUMBERS: Array<[string, string, number]> = [
  ['CreateVolumeRequest', 'name', 1],
  ['CreateVolumeRequest', 'capacity_range', 2],
  ['CreateVolumeRequest', 'volume_capabilities', 3],
  ['CreateVolumeRequest', 'parameters', 4],
  ['CreateVolumeRequest', 'secrets', 5],
  ['CreateVolumeRequest', 'volume_content_source', 6],
  ['CreateVolumeRequest', 'accessibility_requirements', 7],
  ['CreateVolumeRequest', 'mutable_parameters', 8],
  ['DeleteVolumeRequest', 'volume_id', 1],
  ['DeleteVolumeRequest', 'secrets', 2],
  ['NodeStageVolumeRequest', 'staging_target_path', 3],
  ['NodePublishVolumeRequest', 'target_path', 4],
  ['NodePublishVolumeRequest', 'readonly', 6],
  ['ListVolumesRequest', 'max_entries', 1],
  ['ListVolumesRequest', 'starting_token', 2],
  ['GetCapacityRequest', 'accessible_topology', 3],
];

describe('csi/csi.proto', () => {
  let root: protobuf.Root;

  beforeAll(() => {
    // keepCase: field names stay snake_case, as on the wire-level JSON and in proto-loader.
    root = new protobuf.Root().loadSync(PROTO_PATH, { keepCase: true });
    root.resolveAll();
  });

  describe('gRPC services (proto-loader + grpc-js)', () => {
    const packageDefinition = protoLoader.loadSync(PROTO_PATH, LOADER_OPTIONS);
    const loaded = grpc.loadPackageDefinition(packageDefinition);
    const csiV1 = (loaded.csi as grpc.GrpcObject).v1 as grpc.GrpcObject;

    it.each(Object.entries(EXPECTED_RPCS))('%s exposes every spec RPC', (serviceName, rpcs) => {
      const ctor = csiV1[serviceName] as grpc.ServiceClientConstructor;
      expect(ctor).toBeDefined();
      expect(Object.keys(ctor.service).sort()).toEqual([...rpcs].sort());
      for (const rpc of rpcs) {
        const def = ctor.service[rpc];
        expect(def?.path).toBe(`/csi.v1.${serviceName}/${rpc}`);
        expect(def?.requestStream).toBe(false);
        expect(def?.responseStream).toBe(false);
      }
    });

    it('uses the google.protobuf well-known wrapper/timestamp types', () => {
      const typeOf = (message: string, field: string) =>
        root.lookupType(`csi.v1.${message}`).fields[field]?.resolvedType?.fullName;
      expect(typeOf('ProbeResponse', 'ready')).toBe('.google.protobuf.BoolValue');
      expect(typeOf('GetCapacityResponse', 'maximum_volume_size')).toBe('.google.protobuf.Int64Value');
      expect(typeOf('GetCapacityResponse', 'minimum_volume_size')).toBe('.google.protobuf.Int64Value');
      expect(typeOf('Snapshot', 'creation_time')).toBe('.google.protobuf.Timestamp');
    });
  });

  it.each(FIELD_NUMBERS)('%s.%s has field number %i', (message, field, id) => {
    expect(root.lookupType(`csi.v1.${message}`).fields[field]?.id).toBe(id);
  });

  it('keeps the access mode enum values of the spec', () => {
    const mode = root.lookupEnum('csi.v1.VolumeCapability.AccessMode.Mode');
    expect(mode.values).toEqual({
      UNKNOWN: 0,
      SINGLE_NODE_WRITER: 1,
      SINGLE_NODE_READER_ONLY: 2,
      MULTI_NODE_READER_ONLY: 3,
      MULTI_NODE_SINGLE_WRITER: 4,
      MULTI_NODE_MULTI_WRITER: 5,
      SINGLE_NODE_SINGLE_WRITER: 6,
      SINGLE_NODE_MULTI_WRITER: 7,
    });
  });

  it('round-trips a CreateVolumeRequest through encode/decode', () => {
    const type = root.lookupType('csi.v1.CreateVolumeRequest');
    const request = {
      name: 'pvc-0b6c1d2e',
      capacity_range: { required_bytes: '1073741824', limit_bytes: '2147483648' },
      volume_capabilities: [
        { mount: { fs_type: 'ext4', mount_flags: ['noatime'] }, access_mode: { mode: 'SINGLE_NODE_MULTI_WRITER' } },
        { block: {}, access_mode: { mode: 'SINGLE_NODE_WRITER' } },
      ],
      parameters: { tier: 'fast' },
      secrets: { token: 's3cr3t' },
      volume_content_source: { snapshot: { snapshot_id: 'snap-1' } },
      accessibility_requirements: {
        requisite: [{ segments: { 'topology.kubernetes.io/zone': 'z1' } }],
        preferred: [{ segments: { 'topology.kubernetes.io/zone': 'z1' } }],
      },
      mutable_parameters: { iops: '3000' },
    };
    const message = type.fromObject(request);
    expect(type.verify(message)).toBeNull();

    const bytes = type.encode(message).finish();
    expect(bytes.length).toBeGreaterThan(0);
    // Field 1 (name), wire type 2 (length-delimited) => tag byte 0x0a.
    expect(bytes[0]).toBe(0x0a);

    const decoded = type.toObject(type.decode(bytes), { longs: String, enums: String, oneofs: true });
    expect(decoded).toEqual({
      ...request,
      volume_capabilities: [
        { ...request.volume_capabilities[0], access_type: 'mount' },
        { ...request.volume_capabilities[1], access_type: 'block' },
      ],
      volume_content_source: { ...request.volume_content_source, type: 'snapshot' },
    });
  });

  it('decodes the same bytes through the grpc-js serializer', () => {
    const packageDefinition = protoLoader.loadSync(PROTO_PATH, LOADER_OPTIONS);
    const controller = packageDefinition['csi.v1.Controller'] as protoLoader.ServiceDefinition;
    const method = controller.CreateVolume;
    expect(method).toBeDefined();
    if (!method) return;
    const bytes = method.requestSerialize({
      name: 'vol-a',
      capacity_range: { required_bytes: '42' },
      volume_capabilities: [{ mount: { fs_type: 'xfs' }, access_mode: { mode: 'SINGLE_NODE_SINGLE_WRITER' } }],
      secrets: { k: 'v' },
    });
    const decoded = method.requestDeserialize(bytes) as Record<string, unknown>;
    expect(decoded.name).toBe('vol-a');
    expect(decoded.capacity_range).toEqual({ required_bytes: '42', limit_bytes: '0' });
    expect(decoded.secrets).toEqual({ k: 'v' });
    expect(decoded.volume_capabilities).toEqual([
      {
        mount: { fs_type: 'xfs', mount_flags: [], volume_mount_group: '' },
        access_mode: { mode: 'SINGLE_NODE_SINGLE_WRITER' },
        access_type: 'mount',
      },
    ]);
  });
});
