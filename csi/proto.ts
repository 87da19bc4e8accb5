import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import path from 'node:path';
import type { ProtoGrpcType } from './generated/csi';

/** csi.proto sits next to this file in the source tree and is copied next to it in dist/. */
export const CSI_PROTO_PATH = path.join(__dirname, 'csi.proto');

/** Options shared with proto-loader-gen-types (package.json gen:proto) so the generated types match. */
const LOADER_OPTIONS: protoLoader.Options = {
  keepCase: true,
  longs: String,
  enums: String,
  defaults: true,
  oneofs: true,
};

let cached: ProtoGrpcType['csi']['v1'] | undefined;

export function csiPackage(): ProtoGrpcType['csi']['v1'] {
  if (!cached) {
    const definition = protoLoader.loadSync(CSI_PROTO_PATH, LOADER_OPTIONS);
    cached = (grpc.loadPackageDefinition(definition) as unknown as ProtoGrpcType).csi.v1;
  }
  return cached;
}
