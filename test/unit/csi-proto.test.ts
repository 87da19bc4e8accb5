import { createHash } from 'crypto';
import { readFileSync } from 'fs';
import * as path from 'path';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import * as protobuf from 'protobufjs';
import { csiPackage, LOADER_OPTIONS, type CsiMethodDefinition } from '../../csi/proto';

// Guards csi/csi.proto against drifting from CSI spec v1.13.0 (wire numbers checked against
// github.com/container-storage-interface/spec v1.13.0's csi.proto, as the Go module proxy serves it).

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
    'ControllerListVolumeHealth',
    'ControllerGetVolumeHealth',
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
    'NodeGetVolumeHealth',
    'NodeGetStorageHealth',
    'NodeExpandVolume',
    'NodeGetCapabilities',
    'NodeGetInfo',
  ],
  GroupController: [
    'GroupControllerGetCapabilities',
    'CreateVolumeGroupSnapshot',
    'DeleteVolumeGroupSnapshot',
    'GetVolumeGroupSnapshot',
  ],
};

/** The one service whose RPCs stream their answers. */
const SNAPSHOT_METADATA_RPCS = ['GetMetadataAllocated', 'GetMetadataDelta'];

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
  ['GetSnapshotRequest', 'snapshot_id', 1],
  ['GetSnapshotRequest', 'secrets', 2],
  ['GetSnapshotResponse', 'snapshot', 1],
  // New in v1.13.0.
  ['CreateSnapshotRequest', 'accessibility_requirements', 5],
  ['Snapshot', 'accessible_topology', 7],
  ['ControllerListVolumeHealthRequest', 'max_entries', 1],
  ['ControllerListVolumeHealthRequest', 'starting_token', 2],
  ['ControllerListVolumeHealthRequest', 'secrets', 3],
  ['ControllerListVolumeHealthResponse', 'entries', 1],
  ['ControllerListVolumeHealthResponse', 'next_token', 2],
  ['VolumeHealth', 'volume_id', 1],
  ['VolumeHealth', 'health_statuses', 2],
  ['VolumeHealth.VolumeHealthEntry', 'status', 1],
  ['VolumeHealth.VolumeHealthEntry', 'reason', 2],
  ['VolumeHealth.VolumeHealthEntry', 'message', 3],
  ['ControllerGetVolumeHealthRequest', 'volume_id', 1],
  ['ControllerGetVolumeHealthRequest', 'secrets', 2],
  ['ControllerGetVolumeHealthResponse', 'volume_health', 1],
  ['NodeGetVolumeHealthRequest', 'volume_id', 1],
  ['NodeGetVolumeHealthRequest', 'volume_publish_path', 2],
  ['NodeGetVolumeHealthRequest', 'staging_target_path', 3],
  ['NodeGetVolumeHealthResponse', 'volume_health', 1],
  ['NodeGetStorageHealthRequest', 'secrets', 1],
  ['NodeGetStorageHealthResponse', 'backend_health', 1],
  ['NodeGetStorageHealthResponse.StorageBackendHealth', 'status', 1],
  ['NodeGetStorageHealthResponse.StorageBackendHealth', 'reason', 2],
  ['NodeGetStorageHealthResponse.StorageBackendHealth', 'message', 3],
  ['NodeGetStorageHealthResponse.StorageBackendHealth', 'volume_capability', 4],
  // Removed in v1.13.0 (reserved there), kept here for the COs that still read them (see the file's header).
  ['NodeGetVolumeStatsResponse', 'volume_condition', 2],
  ['VolumeCondition', 'abnormal', 1],
  ['VolumeCondition', 'message', 2],
];

// [enum, values]: every value of the enums v1.13.0 added or changed, numbers as published.
const ENUMS: Array<[string, Record<string, number>]> = [
  ['VolumeHealthErrorType', { UNKNOWN_VOLUME_HEALTH_TYPE: 0, DEGRADED: 1, INACCESSIBLE: 2, DATA_LOSS: 3 }],
  ['StorageHealthErrorType', { UNKNOWN_STORAGE_HEALTH_ERROR_TYPE: 0, STORAGE_DEGRADED: 1, STORAGE_UNREACHABLE: 2 }],
  [
    'PluginCapability.Service.Type',
    {
      UNKNOWN: 0,
      CONTROLLER_SERVICE: 1,
      VOLUME_ACCESSIBILITY_CONSTRAINTS: 2,
      GROUP_CONTROLLER_SERVICE: 3,
      SNAPSHOT_METADATA_SERVICE: 4,
      SNAPSHOT_ACCESSIBILITY_CONSTRAINTS: 5,
    },
  ],
  [
    'ControllerServiceCapability.RPC.Type',
    {
      UNKNOWN: 0,
      CREATE_DELETE_VOLUME: 1,
      PUBLISH_UNPUBLISH_VOLUME: 2,
      LIST_VOLUMES: 3,
      GET_CAPACITY: 4,
      CREATE_DELETE_SNAPSHOT: 5,
      LIST_SNAPSHOTS: 6,
      CLONE_VOLUME: 7,
      PUBLISH_READONLY: 8,
      EXPAND_VOLUME: 9,
      LIST_VOLUMES_PUBLISHED_NODES: 10,
      // 11 (VOLUME_CONDITION) is reserved in v1.13.0.
      GET_VOLUME: 12,
      SINGLE_NODE_MULTI_WRITER: 13,
      MODIFY_VOLUME: 14,
      GET_SNAPSHOT: 15,
      GET_VOLUME_HEALTH: 16,
      LIST_VOLUME_HEALTH: 17,
    },
  ],
  [
    'NodeServiceCapability.RPC.Type',
    {
      UNKNOWN: 0,
      STAGE_UNSTAGE_VOLUME: 1,
      GET_VOLUME_STATS: 2,
      EXPAND_VOLUME: 3,
      // Reserved in v1.13.0; kept (see the file's header).
      VOLUME_CONDITION: 4,
      SINGLE_NODE_MULTI_WRITER: 5,
      VOLUME_MOUNT_GROUP: 6,
      GET_VOLUME_HEALTH: 7,
      GET_STORAGE_HEALTH: 8,
    },
  ],
];

/** sha256 of csi.proto in github.com/container-storage-interface/spec@v1.13.0. */
const SPEC_V1_13_0_SHA256 = '8c5604cb76fefff19c01cf88ebd229e4f8c88c419898b07e4914318d25d84af3';

/** The file's one change to the spec's text ([ours, the spec's]), undone to compare it with the published file. */
const KEPT_FROM_V1_12: Array<[string, string]> = [
  [
    `  // durable-csi: v1.13.0 reserves 2 (VolumeCondition, an alpha API it
  // removed); kept as v1.12.0 declared it for the COs that still read it.
  VolumeCondition volume_condition = 2 [(alpha_field) = true];
}

// durable-csi: removed in v1.13.0; as v1.12.0 declared it.
message VolumeCondition {
  option (alpha_message) = true;

  bool abnormal = 1;

  string message = 2;
}
`,
    `  // Field 2 was VolumeCondition, an alpha API that has been removed.
  reserved 2;
}
`,
  ],
  [
    `      // durable-csi: v1.13.0 reserves 4 (VOLUME_CONDITION, an alpha API
      // it removed); kept as v1.12.0 declared it for the COs that still
      // read it.
      VOLUME_CONDITION = 4 [(alpha_enum_value) = true];
`,
    `      // Value 4 was VOLUME_CONDITION, an alpha API that has been
      // removed.
      reserved 4;
`,
  ],
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

    it('SnapshotMetadata streams its answers', () => {
      const ctor = csiV1.SnapshotMetadata as grpc.ServiceClientConstructor;
      expect(Object.keys(ctor.service).sort()).toEqual(SNAPSHOT_METADATA_RPCS);
      for (const rpc of SNAPSHOT_METADATA_RPCS) {
        expect(ctor.service[rpc]?.path).toBe(`/csi.v1.SnapshotMetadata/${rpc}`);
        expect(ctor.service[rpc]?.responseStream).toBe(true);
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

  describe("the driver's own service definitions (csi/proto.ts, without proto-loader)", () => {
    const reference = (
      grpc.loadPackageDefinition(protoLoader.loadSync(PROTO_PATH, LOADER_OPTIONS)).csi as grpc.GrpcObject
    ).v1 as grpc.GrpcObject;
    const ours = csiPackage() as unknown as Record<string, grpc.ServiceClientConstructor>;
    const methods = [...Object.keys(EXPECTED_RPCS), 'SnapshotMetadata'].flatMap((service) =>
      Object.keys((reference[service] as grpc.ServiceClientConstructor).service).map((rpc) => [service, rpc] as const),
    );

    it('has every service and method proto-loader has, with the same paths, streaming and client names', () => {
      for (const [service, rpc] of methods) {
        const theirs = (reference[service] as grpc.ServiceClientConstructor).service[rpc]!;
        const mine = ours[service]?.service[rpc] as CsiMethodDefinition | undefined;
        expect({ service, rpc, ...pick(mine) }).toEqual({ service, rpc, ...pick(theirs) });
        expect(mine?.requestTypeName).toBe(
          (theirs as unknown as { requestType: { type: { name: string } } }).requestType.type.name,
        );
      }
    });

    it.each(methods)('%s.%s encodes and decodes every field as proto-loader does', (service, rpc) => {
      const theirs = (reference[service] as grpc.ServiceClientConstructor).service[rpc]!;
      const mine = ours[service]!.service[rpc]!;
      const method = root.lookupService(`csi.v1.${service}`).methods[rpc]!;
      for (const [type, serialize, deserialize] of [
        [method.resolvedRequestType!, 'requestSerialize', 'requestDeserialize'],
        [method.resolvedResponseType!, 'responseSerialize', 'responseDeserialize'],
      ] as const) {
        const sample = sampleOf(type, 0);
        const bytes = theirs[serialize](sample);
        if (type.fieldsArray.length > 0) expect(bytes.length).toBeGreaterThan(0);
        expect(mine[serialize](sample)).toEqual(bytes);
        expect(mine[deserialize](bytes)).toEqual(theirs[deserialize](bytes));
        // Absent fields come back as proto-loader's defaults (defaults: true), oneofs named (oneofs: true).
        expect(mine[deserialize](Buffer.alloc(0))).toEqual(theirs[deserialize](Buffer.alloc(0)));
      }
    });
  });

  it.each(FIELD_NUMBERS)('%s.%s has field number %i', (message, field, id) => {
    expect(root.lookupType(`csi.v1.${message}`).fields[field]?.id).toBe(id);
  });

  it.each(ENUMS)('%s has the values of the spec', (name, values) => {
    expect(root.lookupEnum(`csi.v1.${name}`).values).toEqual(values);
  });

  it('is the spec file itself but for the header and the VolumeCondition it keeps', () => {
    let text = readFileSync(PROTO_PATH, 'utf8');
    const specStart = text.indexOf('// Code generated by make; DO NOT EDIT.');
    expect(specStart).toBeGreaterThan(0);
    text = text.slice(specStart);
    for (const [ours, spec] of KEPT_FROM_V1_12) {
      expect(text.split(ours)).toHaveLength(2);
      text = text.replace(ours, spec);
    }
    expect(text).not.toContain('durable-csi');
    expect(createHash('sha256').update(text).digest('hex')).toBe(SPEC_V1_13_0_SHA256);
  });

  it('marks csi_secret on the 22 fields the spec marks', () => {
    const secret = (field: protobuf.Field) => field.options?.['(csi_secret)'] === true;
    const marked: string[] = [];
    const visit = (namespace: protobuf.NamespaceBase) => {
      for (const nested of namespace.nestedArray) {
        if (nested instanceof protobuf.Type) {
          for (const field of nested.fieldsArray) if (secret(field)) marked.push(`${nested.name}.${field.name}`);
        }
        if (nested instanceof protobuf.Namespace) visit(nested);
      }
    };
    visit(root.lookup('csi.v1') as protobuf.Namespace);
    expect(marked).toHaveLength(22);
    expect(marked).toEqual(
      expect.arrayContaining(['GetSnapshotRequest.secrets', 'NodeGetStorageHealthRequest.secrets']),
    );
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

/** What grpc-js reads of a method definition, besides its functions. */
function pick(
  definition:
    | Pick<grpc.MethodDefinition<unknown, unknown>, 'path' | 'requestStream' | 'responseStream' | 'originalName'>
    | undefined,
) {
  return {
    path: definition?.path,
    requestStream: definition?.requestStream,
    responseStream: definition?.responseStream,
    originalName: definition?.originalName,
  };
}

/**
 * A message of `type` with every field set (the first member of each oneof, maps and repeated fields with one entry,
 * enums by their last value's name, 64-bit integers as decimal strings), nested messages to a depth of three.
 */
function sampleOf(type: protobuf.Type, depth: number): Record<string, unknown> {
  const sample: Record<string, unknown> = {};
  const inOneofs = new Set(type.oneofsArray.flatMap((oneof) => oneof.fieldsArray.slice(1).map((field) => field.name)));
  for (const field of type.fieldsArray) {
    if (inOneofs.has(field.name)) continue;
    const value = sampleValue(field, depth);
    if (value === undefined) continue;
    if (field.map) sample[field.name] = { key: value };
    else sample[field.name] = field.repeated ? [value] : value;
  }
  return sample;
}

function sampleValue(field: protobuf.Field, depth: number): unknown {
  field.resolve();
  const resolved = field.resolvedType;
  if (resolved instanceof protobuf.Enum) return Object.keys(resolved.values).at(-1);
  if (resolved instanceof protobuf.Type) return depth < 3 ? sampleOf(resolved, depth + 1) : undefined;
  switch (field.type) {
    case 'string':
      return `${field.name}-value`;
    case 'bool':
      return true;
    case 'bytes':
      return Buffer.from('bytes');
    case 'int64':
    case 'uint64':
    case 'sint64':
    case 'fixed64':
    case 'sfixed64':
      return '9007199254740993';
    default:
      return 7;
  }
}
