import crypto from 'node:crypto';
import type { CoreV1Api } from '@kubernetes/client-node';
import type { Logger } from '../common/logger';
import type { WrittenOffReport } from '../activities/control-activities';
import { listDriverPvs } from './driver-pvs';
import { statusOf } from './kube-config';
import { recordPvEvents } from './pv-events';

const COMPONENT = 'durable-csi-controller';
/** Where the Events on the Node live when the PV is gone (Nodes are cluster-scoped, like PVs). */
const EVENT_NAMESPACE = 'default';

/**
 * Reports, as Kubernetes Events, that a node which was forgotten came back and its written-off volumes were
 * deleted for real. On the PV when it still exists (rare: the CO was told the volume was gone and normally
 * removed it), else on the Node object, one Event per volume, named after the volume so replicas agree.
 */
export function writtenOffEvents(core: CoreV1Api, driverName: string, logger: Logger) {
  return async (report: WrittenOffReport): Promise<void> => {
    const pvs = await listDriverPvs(core, driverName).catch(() => []);
    for (const volume of report.volumes) {
      const message =
        `node ${report.nodeId} came back after it was forgotten (${volume.reason}); volume ${volume.volumeId}, ` +
        `written off then, was deleted on its pool now (${volume.outcome})`;
      const key = `${volume.volumeId}/written-off-deleted`;
      const pv = pvs.filter((candidate) => candidate.volumeHandle === volume.volumeId);
      if (pv.length > 0) {
        await recordPvEvents(
          core,
          COMPONENT,
          pv,
          { type: 'Normal', reason: 'WrittenOffDeleted', message, key },
          logger,
        );
        continue;
      }
      const digest = crypto.createHash('sha256').update(key).digest('hex').slice(0, 16);
      const now = new Date();
      const body = {
        metadata: { name: `${report.nodeId}.${digest}`, namespace: EVENT_NAMESPACE },
        involvedObject: { apiVersion: 'v1', kind: 'Node', name: report.nodeId },
        type: 'Normal',
        reason: 'WrittenOffDeleted',
        message,
        source: { component: COMPONENT },
        reportingComponent: COMPONENT,
        reportingInstance: process.env.HOSTNAME ?? `pid-${process.pid}`,
        action: 'WrittenOffDeleted',
        firstTimestamp: now,
        lastTimestamp: now,
        count: 1,
      };
      try {
        await core.createNamespacedEvent({ namespace: EVENT_NAMESPACE, body });
      } catch (error) {
        if (statusOf(error) === 409) continue; // another replica, or an earlier attempt, reported it
        logger.warn({ err: error, node: report.nodeId }, 'could not record an Event on the Node');
      }
    }
  };
}
