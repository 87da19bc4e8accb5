import type { CoreV1Api } from '@kubernetes/client-node';
import type { Logger } from '../common/logger';
import type { WrittenOffReport } from '../activities/control-activities';
import { listDriverPvs } from './driver-pvs';
import { recordEvent, recordPvEvents } from './pv-events';

const COMPONENT = 'durable-csi-controller';

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
        `node ${report.nodeId} came back after it was forgotten (${volume.reason}); ` +
        `${volume.kind === 'snapshot' ? 'snapshot' : 'volume'} ${volume.volumeId}, ` +
        `written off then, was deleted on its pool now (${volume.outcome})`;
      const event = {
        type: 'Normal',
        reason: 'WrittenOffDeleted',
        message,
        key: `${volume.volumeId}/written-off-deleted`,
      } as const;
      const pv = pvs.filter((candidate) => candidate.volumeHandle === volume.volumeId);
      if (pv.length > 0) await recordPvEvents(core, COMPONENT, pv, event, logger);
      else await recordEvent(core, COMPONENT, { kind: 'Node', name: report.nodeId }, event, logger);
    }
  };
}
