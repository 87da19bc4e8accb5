import crypto from 'node:crypto';
import type { CoreV1Api } from '@kubernetes/client-node';
import type { Logger } from '../common/logger';
import type { DriverPv } from './driver-pvs';
import { statusOf } from './kube-config';

export interface PvEvent {
  type: 'Normal' | 'Warning';
  /** UpperCamelCase, as `kubectl describe pv` shows it. */
  reason: string;
  message: string;
  /**
   * Names the decision the event reports (e.g. the Node's UID and the action): every controller replica
   * reports the same decision under the same Event name, so the first one wins and the others change nothing.
   */
  key: string;
}

/** Where Events about cluster-scoped objects live (kubectl describe pv finds them there). */
const EVENT_NAMESPACE = 'default';

/** Records an Event on each PV; failures are logged, never thrown (an Event is a report, not the decision). */
export async function recordPvEvents(
  core: CoreV1Api,
  component: string,
  pvs: DriverPv[],
  event: PvEvent,
  logger: Logger,
): Promise<void> {
  const now = new Date();
  for (const pv of pvs) {
    const digest = crypto.createHash('sha256').update(`${pv.uid}/${event.key}`).digest('hex').slice(0, 16);
    const body = {
      metadata: { name: `${pv.name}.${digest}`, namespace: EVENT_NAMESPACE },
      involvedObject: { apiVersion: 'v1', kind: 'PersistentVolume', name: pv.name, uid: pv.uid },
      type: event.type,
      reason: event.reason,
      message: event.message,
      source: { component },
      reportingComponent: component,
      reportingInstance: process.env.HOSTNAME ?? `pid-${process.pid}`,
      action: event.reason,
      firstTimestamp: now,
      lastTimestamp: now,
      count: 1,
    };
    try {
      await core.createNamespacedEvent({ namespace: EVENT_NAMESPACE, body });
    } catch (error) {
      if (statusOf(error) === 409) continue; // another replica reported the same decision
      logger.warn({ err: error, pv: pv.name, reason: event.reason }, 'could not record an Event on the PV');
    }
  }
}
