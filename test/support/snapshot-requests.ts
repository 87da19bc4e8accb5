import { call, withDeadline, type CsiClients } from '../../csi/client';
import type { CreateSnapshotResponse__Output } from '../../csi/generated/csi/v1/CreateSnapshotResponse';
import type { GetSnapshotResponse__Output } from '../../csi/generated/csi/v1/GetSnapshotResponse';
import type { ListSnapshotsResponse__Output } from '../../csi/generated/csi/v1/ListSnapshotsResponse';

export function createSnapshot(clients: CsiClients, name: string, sourceVolumeId: string, timeoutMs = 15_000) {
  return call<CreateSnapshotResponse__Output>((done) =>
    clients.controller.CreateSnapshot({ name, source_volume_id: sourceVolumeId }, withDeadline(timeoutMs), done),
  );
}

export function deleteSnapshot(clients: CsiClients, snapshotId: string, timeoutMs = 15_000) {
  return call<object>((done) =>
    clients.controller.DeleteSnapshot({ snapshot_id: snapshotId }, withDeadline(timeoutMs), done),
  );
}

/** Longer than the 5 s a silent node is given to pick a lookup up (workflows/node-work.ts listOptions). */
const LOOKUP_DEADLINE_MS = 15_000;

export function getSnapshot(clients: CsiClients, snapshotId: string) {
  return call<GetSnapshotResponse__Output>((done) =>
    clients.controller.GetSnapshot({ snapshot_id: snapshotId }, withDeadline(LOOKUP_DEADLINE_MS), done),
  );
}

/** One ListSnapshots call (a page, or a lookup by snapshot_id / source_volume_id). */
export function listSnapshots(clients: CsiClients, request: Record<string, unknown>) {
  return call<ListSnapshotsResponse__Output>((done) =>
    clients.controller.ListSnapshots(request, withDeadline(LOOKUP_DEADLINE_MS), done),
  );
}

/**
 * A CreateSnapshot answer that gives the CO no snapshot yet: ABORTED (the copy runs, or waits for its node), or an
 * OK not ready to use (CSI allows it; this driver does not answer so, docs/snapshots.md). Anything else (ready,
 * another error) is returned as what it is.
 */
export async function notReadyYet(answer: Promise<CreateSnapshotResponse__Output>): Promise<true | string> {
  try {
    const snapshot = (await answer).snapshot;
    return snapshot?.ready_to_use === false ? true : `ready: ${snapshot?.snapshot_id}`;
  } catch (error) {
    const code = (error as { code?: number }).code;
    return code === 10 ? true : `error ${code}: ${(error as Error).message}`;
  }
}

/** CreateSnapshot asked again, as the CO does, until the answer is ready to use (ABORTED and not-ready: again). */
export async function createSnapshotUntilReady(
  clients: CsiClients,
  name: string,
  sourceVolumeId: string,
  totalMs = 120_000,
): Promise<CreateSnapshotResponse__Output> {
  const until = Date.now() + totalMs;
  for (;;) {
    const answer = await createSnapshot(clients, name, sourceVolumeId).catch((error: { code?: number }) => {
      if (error.code !== 10 || Date.now() > until) throw error;
      return undefined;
    });
    if (answer?.snapshot?.ready_to_use) return answer;
    if (Date.now() > until) throw new Error(`snapshot "${name}" not ready within ${totalMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
}
