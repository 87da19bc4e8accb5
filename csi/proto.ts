import * as grpc from '@grpc/grpc-js';
import path from 'node:path';
import * as protobuf from 'protobufjs';
import type { ProtoGrpcType } from './generated/csi';

/** csi.proto sits next to this file in the source tree and is copied next to it in dist/. */
export const CSI_PROTO_PATH = path.join(__dirname, 'csi.proto');

/** The one package csi.proto declares: every CSI message's full name starts with it. */
export const CSI_PACKAGE = 'csi.v1';

/**
 * How messages are converted to and from objects, shared with proto-loader-gen-types (package.json gen:proto) so the
 * generated types match: the options @grpc/proto-loader would be given (keepCase applies to parsing, the rest to
 * `toObject`).
 */
export const LOADER_OPTIONS = {
  keepCase: true,
  longs: String,
  enums: String,
  defaults: true,
  oneofs: true,
} as const;

/**
 * csi.proto imports it only to `extend` six of its option messages (csi_secret, alpha_field, ...): no CSI message
 * holds a descriptor. Those six, declared extensible, stand in for the whole file, whose reflection cost every agent
 * about 1.7 MB of heap when loaded (docs/scale.md, "Memory"); the options parse the same
 * (test/unit/csi/redact.test.ts).
 */
const DESCRIPTOR_PROTO = 'google/protobuf/descriptor.proto';
const DESCRIPTOR_OPTIONS = `syntax = "proto2";
package google.protobuf;
${['FieldOptions', 'EnumOptions', 'EnumValueOptions', 'MessageOptions', 'MethodOptions', 'ServiceOptions']
  .map((name) => `message ${name} { extensions 1000 to max; }`)
  .join('\n')}`;

/** The CSI services, as the server and clients use them (csi/server.ts, csi/client.ts). */
export type CsiServices = Pick<ProtoGrpcType['csi']['v1'], 'Identity' | 'Controller' | 'GroupController' | 'Node'>;

/** A method as grpc-js takes it, with its request message's name (csi/server.ts redacts requests by it). */
export interface CsiMethodDefinition extends grpc.MethodDefinition<object, object> {
  requestTypeName: string;
}

let cached: CsiServices | undefined;
let cachedRoot: protobuf.Root | undefined;

/**
 * The gRPC service definitions, built from csiRoot() as @grpc/proto-loader would build them (the same protobufjs
 * conversions, LOADER_OPTIONS), without proto-loader: it loads protobufjs's descriptor extension and keeps a
 * descriptor object per message and a second copy of the reflection: 3.6 MB more heap when loaded, 1.6 MB of it still
 * live in a settled node agent (docs/scale.md, "Memory"). test/unit/csi-proto.test.ts checks the wire and the
 * objects against it.
 */
export function csiPackage(): CsiServices {
  cached ??= grpcServices(csiRoot(), CSI_PACKAGE, LOADER_OPTIONS) as unknown as CsiServices;
  return cached;
}

/**
 * The services of `packageName` in a resolved root, as grpc-js client constructors (each with its `.service`
 * definition): what `grpc.loadPackageDefinition(protoLoader.loadSync(file, options))` gives for them. Messages are
 * converted to objects with `options`.
 */
export function grpcServices(
  root: protobuf.Namespace,
  packageName: string,
  options: protobuf.IConversionOptions,
): Record<string, grpc.ServiceClientConstructor> {
  const services: Record<string, grpc.ServiceClientConstructor> = {};
  const namespace = root.lookup(packageName);
  for (const service of namespace instanceof protobuf.Namespace ? namespace.nestedArray : []) {
    if (!(service instanceof protobuf.Service)) continue;
    const definition: Record<string, CsiMethodDefinition> = {};
    for (const method of service.methodsArray)
      definition[method.name] = methodDefinition(`${packageName}.${service.name}`, method, options);
    services[service.name] = grpc.makeGenericClientConstructor(definition, service.name);
  }
  return services;
}

function methodDefinition(
  serviceName: string,
  method: protobuf.Method,
  options: protobuf.IConversionOptions,
): CsiMethodDefinition {
  // Resolved by the root's resolveAll().
  const request = method.resolvedRequestType as protobuf.Type;
  const response = method.resolvedResponseType as protobuf.Type;
  return {
    path: `/${serviceName}/${method.name}`,
    requestStream: !!method.requestStream,
    responseStream: !!method.responseStream,
    requestSerialize: serializer(request),
    requestDeserialize: deserializer(request, options),
    responseSerialize: serializer(response),
    responseDeserialize: deserializer(response, options),
    // grpc-js also names the client method so (CreateVolume and createVolume), as proto-loader has it.
    originalName: method.name.charAt(0).toLowerCase() + method.name.slice(1),
    requestTypeName: request.name,
  };
}

function serializer(type: protobuf.Type): (message: object) => Buffer {
  return (message) => {
    if (Array.isArray(message))
      throw new Error(`Failed to serialize message: expected object with ${type.name} structure, got array instead`);
    // In Node protobufjs writes into a Buffer.
    return type.encode(type.fromObject(message)).finish() as Buffer;
  };
}

function deserializer(type: protobuf.Type, options: protobuf.IConversionOptions): (bytes: Buffer) => object {
  return (bytes) => type.toObject(type.decode(bytes), options);
}

/**
 * csi.proto as protobufjs reflection, with custom field options such as csi_secret (csi/redact.ts reads them).
 * Field names as on the wire (keepCase). Loaded on first use; the spec's comments, which the parser keeps on every
 * type and field, are dropped (nothing reads them, and csi.proto is mostly comments).
 */
export function csiRoot(): protobuf.Root {
  if (!cachedRoot) {
    const root = new protobuf.Root();
    protobuf.parse(DESCRIPTOR_OPTIONS, root, { keepCase: true });
    // Loaded: csi.proto's import of it is skipped.
    root.files.push(DESCRIPTOR_PROTO);
    root.resolvePath = (origin, target) =>
      target === DESCRIPTOR_PROTO ? DESCRIPTOR_PROTO : protobuf.util.path.resolve(origin, target);
    root.loadSync(CSI_PROTO_PATH, { keepCase: true }).resolveAll();
    dropComments(root);
    cachedRoot = root;
  }
  return cachedRoot;
}

function dropComments(object: protobuf.ReflectionObject): void {
  object.comment = null;
  if (object instanceof protobuf.Enum) object.comments = {};
  if (object instanceof protobuf.Type) [...object.fieldsArray, ...object.oneofsArray].forEach(dropComments);
  if (object instanceof protobuf.Service) object.methodsArray.forEach(dropComments);
  if (object instanceof protobuf.Namespace) object.nestedArray.forEach(dropComments);
}
