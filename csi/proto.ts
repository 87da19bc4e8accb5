import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import path from 'node:path';
import * as protobuf from 'protobufjs';
import type { ProtoGrpcType } from './generated/csi';

/** csi.proto sits next to this file in the source tree and is copied next to it in dist/. */
export const CSI_PROTO_PATH = path.join(__dirname, 'csi.proto');

/** The one package csi.proto declares: every CSI message's full name starts with it. */
export const CSI_PACKAGE = 'csi.v1';

/** Options shared with proto-loader-gen-types (package.json gen:proto) so the generated types match. */
export const LOADER_OPTIONS: protoLoader.Options = {
  keepCase: true,
  longs: String,
  enums: String,
  defaults: true,
  oneofs: true,
};

/**
 * csi.proto imports it for the `extend` of csi_secret. proto-loader, imported above, registers it among the files
 * protobufjs bundles when both share one protobufjs (as they do now); should they not, the copy protobufjs ships
 * is read.
 */
const DESCRIPTOR_PROTO = 'google/protobuf/descriptor.proto';

let cached: ProtoGrpcType['csi']['v1'] | undefined;
let cachedRoot: protobuf.Root | undefined;

export function csiPackage(): ProtoGrpcType['csi']['v1'] {
  if (!cached) {
    const definition = protoLoader.loadSync(CSI_PROTO_PATH, LOADER_OPTIONS);
    cached = (grpc.loadPackageDefinition(definition) as unknown as ProtoGrpcType).csi.v1;
  }
  return cached;
}

/**
 * csi.proto as protobufjs reflection, with what the gRPC definitions leave out: custom field options such as
 * csi_secret (csi/redact.ts reads them). Field names as on the wire (keepCase), like csiPackage()'s messages.
 * Loaded on first use.
 */
export function csiRoot(): protobuf.Root {
  if (!cachedRoot) {
    const root = new protobuf.Root();
    root.resolvePath = (origin, target) =>
      target === DESCRIPTOR_PROTO
        ? require.resolve(`protobufjs/${DESCRIPTOR_PROTO}`)
        : protobuf.util.path.resolve(origin, target);
    root.loadSync(CSI_PROTO_PATH, { keepCase: true }).resolveAll();
    cachedRoot = root;
  }
  return cachedRoot;
}
