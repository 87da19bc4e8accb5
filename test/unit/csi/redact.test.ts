import * as path from 'node:path';
import * as protoLoader from '@grpc/proto-loader';
import * as protobuf from 'protobufjs';
import { CSI_PACKAGE, csiRoot } from '../../../csi/proto';
import { redactSecrets } from '../../../csi/redact';

const PROTO_PATH = path.join(__dirname, '..', '..', '..', 'csi', 'csi.proto');

/**
 * CSI spec v1.13.0 (github.com/container-storage-interface/spec@v1.13.0's csi.proto, which csi/csi.proto is) sets
 * `[(csi_secret) = true]` on these 22 fields, all named `secrets`.
 */
const SPEC_SECRET_FIELDS = [
  'ControllerExpandVolumeRequest.secrets',
  'ControllerGetVolumeHealthRequest.secrets',
  'ControllerListVolumeHealthRequest.secrets',
  'ControllerModifyVolumeRequest.secrets',
  'ControllerPublishVolumeRequest.secrets',
  'ControllerUnpublishVolumeRequest.secrets',
  'CreateSnapshotRequest.secrets',
  'CreateVolumeGroupSnapshotRequest.secrets',
  'CreateVolumeRequest.secrets',
  'DeleteSnapshotRequest.secrets',
  'DeleteVolumeGroupSnapshotRequest.secrets',
  'DeleteVolumeRequest.secrets',
  'GetMetadataAllocatedRequest.secrets',
  'GetMetadataDeltaRequest.secrets',
  'GetSnapshotRequest.secrets',
  'GetVolumeGroupSnapshotRequest.secrets',
  'ListSnapshotsRequest.secrets',
  'NodeExpandVolumeRequest.secrets',
  'NodeGetStorageHealthRequest.secrets',
  'NodePublishVolumeRequest.secrets',
  'NodeStageVolumeRequest.secrets',
  'ValidateVolumeCapabilitiesRequest.secrets',
];

/** Every message type of a namespace, nested ones included. */
function messageTypes(namespace: protobuf.Namespace): protobuf.Type[] {
  return namespace.nestedArray.flatMap((nested) => [
    ...(nested instanceof protobuf.Type ? [nested] : []),
    ...(nested instanceof protobuf.Namespace ? messageTypes(nested) : []),
  ]);
}

/**
 * The fields of csi.proto carrying csi_secret, read from a load of the file of the test's own (not csi/redact.ts's
 * reading of the option), so a secret field csi.proto gains is covered here without a change to the test.
 */
function secretFieldsOfCsiProto(): protobuf.Field[] {
  protoLoader.loadSync(PROTO_PATH); // registers descriptor.proto among protobufjs' bundled files
  const root = new protobuf.Root().loadSync(PROTO_PATH, { keepCase: true });
  root.resolveAll();
  const csi = root.lookup(CSI_PACKAGE) as protobuf.Namespace;
  return messageTypes(csi).flatMap((type) => type.fieldsArray.filter((field) => field.options?.['(csi_secret)']));
}

/** A value for `field` holding `value`, of the shape the gRPC loader gives a field of its kind. */
function holding(field: protobuf.Field, value: string): unknown {
  if (field.map) return { key: value };
  if (field.repeated) return [value];
  return value;
}

describe('redactSecrets over csi.proto', () => {
  const secretFields = secretFieldsOfCsiProto();

  it("finds the spec's csi_secret fields in csi.proto: 22, on the spec's messages", () => {
    const names = secretFields.map((field) => `${field.parent?.name}.${field.name}`).sort();
    expect(names).toEqual(SPEC_SECRET_FIELDS);
    expect(secretFields).toHaveLength(22);
  });

  it.each(secretFields.map((field) => [`${field.parent?.name}.${field.name}`, field] as const))(
    'masks %s and keeps the rest of the message',
    (_name, field) => {
      const typeName = `${CSI_PACKAGE}.${field.parent?.name}`;
      const request = { [field.name]: holding(field, 'the-secret-value'), volume_id: 'vol-1', name: 'pvc-1' };
      const redacted = redactSecrets(request, typeName);
      expect(redacted[field.name]).toEqual(holding(field, '***'));
      expect(JSON.stringify(redacted)).not.toContain('the-secret-value');
      expect(redacted).toMatchObject({ volume_id: 'vol-1', name: 'pvc-1' });
    },
  );

  it('masks every value of a request secrets map, keeps its keys and the other fields', () => {
    const request = {
      name: 'pvc-1',
      parameters: { tier: 'fast' },
      secrets: { username: 'admin', password: 'hunter2' },
    };
    expect(redactSecrets(request, 'csi.v1.CreateVolumeRequest')).toEqual({
      name: 'pvc-1',
      parameters: { tier: 'fast' },
      secrets: { username: '***', password: '***' },
    });
  });

  it('does not mask a field without the option, even one holding a key named like a secret', () => {
    const request = {
      name: 'pvc-1',
      parameters: { secrets: 'not-a-secret-field', password: 'plain' },
      mutable_parameters: { token: 'plain-too' },
      secrets: {},
    };
    expect(redactSecrets(request, 'csi.v1.CreateVolumeRequest')).toEqual(request);
  });

  it('returns a message whose type holds no secret as it is', () => {
    const request = { volume_id: 'vol-1', volume_path: '/var/lib/kubelet/x', staging_target_path: '' };
    expect(redactSecrets(request, 'csi.v1.NodeGetVolumeStatsRequest')).toBe(request);
  });

  it('masks an empty secrets map to an empty map and leaves an absent or null one alone', () => {
    expect(redactSecrets({ secrets: {} }, 'csi.v1.DeleteVolumeRequest')).toEqual({ secrets: {} });
    expect(redactSecrets({ secrets: null }, 'csi.v1.DeleteVolumeRequest')).toEqual({ secrets: null });
    expect(redactSecrets({ volume_id: 'v' }, 'csi.v1.DeleteVolumeRequest')).toEqual({ volume_id: 'v' });
  });

  it('does not change its input', () => {
    const request = { volume_id: 'vol-1', secrets: { password: 'hunter2' } };
    const before = structuredClone(request);
    const redacted = redactSecrets(request, 'csi.v1.NodeStageVolumeRequest');
    expect(request).toEqual(before);
    expect(redacted).not.toBe(request);
    expect(redacted.secrets).toEqual({ password: '***' });
  });

  it('masks the whole message when its type is not in csi.proto', () => {
    expect(redactSecrets({ secrets: { a: 'b' }, other: 'x' }, 'csi.v1.NoSuchRequest')).toBe('***');
  });
});

/**
 * csi.proto's secret fields are all maps at the top of a request; these types, added to the same root, cover a
 * secret in a nested message, in lists and maps of messages, secret fields of other kinds, a field named like a
 * secret without the option, and a type that contains itself.
 */
const NESTED_PROTO = `
syntax = "proto3";
package redacttest;

message Lookalike {
  map<string, string> secrets = 1;
  string password = 2;
}

message Inner {
  map<string, string> token = 1 [(csi.v1.csi_secret) = true];
  string keep = 2;
}

message Outer {
  Inner one = 1;
  repeated Inner many = 2;
  map<string, Inner> by_name = 3;
  string plain = 4;
  string password = 5 [(csi.v1.csi_secret) = true];
  repeated string keys = 6 [(.csi.v1.csi_secret) = true];
  Lookalike lookalike = 7;
  Outer self = 8;
  bytes data = 9;
}
`;

describe('redactSecrets over nested messages', () => {
  beforeAll(() => {
    const root = csiRoot();
    protobuf.parse(NESTED_PROTO, root, { keepCase: true });
    root.resolveAll();
  });

  const data = Buffer.from('bytes');
  const lookalike = { secrets: { user: 'visible-1' }, password: 'visible-2' };
  /** An Outer whose every csi_secret value is `secret(where)`; all else is the same whatever `secret` is. */
  const outer = (secret: (where: string) => string) => ({
    one: { token: { a: secret('one') }, keep: 'k1' },
    many: [{ token: { b: secret('many') }, keep: 'k2' }, { keep: 'k3' }],
    by_name: { first: { token: { c: secret('map') }, keep: 'k4' } },
    plain: 'p',
    password: secret('password'),
    keys: [secret('key-1'), secret('key-2')],
    lookalike,
    self: { password: secret('self'), one: { token: { d: secret('deep') } } },
    data,
  });

  it('masks secret fields inside nested messages, lists and maps of messages, and of every kind', () => {
    const input = outer((where) => `s-${where}`);
    const redacted = redactSecrets(input, 'redacttest.Outer');
    expect(redacted).toEqual(outer(() => '***'));
    expect(JSON.stringify(redacted)).not.toMatch(/"s-/);
    expect(redacted.lookalike).toBe(lookalike);
    expect(redacted.data).toBe(data);
    expect(input.one.token.a).toBe('s-one');
  });

  it('leaves a field named like a secret alone when it lacks the option', () => {
    const lookalike = { secrets: { user: 'admin' }, password: 'hunter2' };
    expect(redactSecrets(lookalike, 'redacttest.Lookalike')).toEqual({
      secrets: { user: 'admin' },
      password: 'hunter2',
    });
  });
});
