import { status, type ServiceError } from '@grpc/grpc-js';
import { call, withDeadline, type CsiClients } from '../../csi/client';
import type { CreateVolumeRequest } from '../../csi/generated/csi/v1/CreateVolumeRequest';
import type { CreateVolumeResponse__Output } from '../../csi/generated/csi/v1/CreateVolumeResponse';
import { TOPOLOGY_NODE_KEY } from '../../common/names';

export const GiB = 1024 ** 3;
export const MiB = 1024 ** 2;

export function createRequest(name: string, bytes = 64 * MiB, extra: Partial<CreateVolumeRequest> = {}) {
  return {
    name,
    capacity_range: { required_bytes: String(bytes) },
    volume_capabilities: [{ mount: {}, access_mode: { mode: 'SINGLE_NODE_WRITER' as const } }],
    ...extra,
  };
}

export function onNode(nodeId: string) {
  const topology = { segments: { [TOPOLOGY_NODE_KEY]: nodeId } };
  return { accessibility_requirements: { requisite: [topology], preferred: [topology] } };
}

export function createVolume(clients: CsiClients, request: CreateVolumeRequest, timeoutMs = 15_000) {
  return call<CreateVolumeResponse__Output>((done) =>
    clients.controller.CreateVolume(request, withDeadline(timeoutMs), done),
  );
}

export function deleteVolume(clients: CsiClients, volumeId: string, timeoutMs = 15_000) {
  return call<object>((done) =>
    clients.controller.DeleteVolume({ volume_id: volumeId }, withDeadline(timeoutMs), done),
  );
}

/** The gRPC status name of a failed call, or 'OK'. */
export async function codeOf(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
    return 'OK';
  } catch (error) {
    const code = (error as ServiceError).code;
    if (code === undefined) throw error;
    return status[code];
  }
}

const RETRIABLE = new Set<number>([status.ABORTED, status.UNAVAILABLE, status.DEADLINE_EXCEEDED]);

/** What a CO does: repeat the call while it answers a retriable code, up to a deadline. */
export async function retryLikeCo<T>(attempt: () => Promise<T>, totalMs = 120_000, pauseMs = 500): Promise<T> {
  const until = Date.now() + totalMs;
  for (;;) {
    try {
      return await attempt();
    } catch (error) {
      const code = (error as ServiceError).code;
      if (!RETRIABLE.has(code) || Date.now() > until) throw error;
      await new Promise((resolve) => setTimeout(resolve, pauseMs));
    }
  }
}
