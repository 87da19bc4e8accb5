import crypto from 'node:crypto';
import type { CoreV1Api } from '@kubernetes/client-node';
import type { Logger } from '../common/logger';
import type { DriverPv } from './driver-pvs';
import { statusOf } from './api-status';

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

/** The cluster-scoped object an Event is about: a PersistentVolume or a Node. */
export interface EventSubject {
  kind: 'PersistentVolume' | 'Node';
  name: string;
  uid?: string;
}

/**
 * Where Events about cluster-scoped objects live: the API server accepts an Event whose object has no namespace only
 * in `default` (or none), and kubectl describe pv/node finds them there. durable-csi's Role allows it this one.
 */
const EVENT_NAMESPACE = 'default';

/** Records an Event on each PV; failures are logged, never thrown (an Event is a report, not the decision). */
export async function recordPvEvents(
  core: CoreV1Api,
  component: string,
  pvs: DriverPv[],
  event: PvEvent,
  logger: Logger,
): Promise<void> {
  for (const pv of pvs)
    await recordEvent(core, component, { kind: 'PersistentVolume', name: pv.name, uid: pv.uid }, event, logger);
}

/** Records one Event on a cluster-scoped object, named after the subject and the decision so replicas agree. */
export async function recordEvent(
  core: CoreV1Api,
  component: string,
  subject: EventSubject,
  event: PvEvent,
  logger: Logger,
): Promise<void> {
  const now = new Date();
  const digest = crypto
    .createHash('sha256')
    .update(`${subject.uid ?? subject.name}/${event.key}`)
    .digest('hex')
    .slice(0, 16);
  const body = {
    metadata: { name: `${subject.name}.${digest}`, namespace: EVENT_NAMESPACE },
    involvedObject: { apiVersion: 'v1', ...subject },
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
    if (statusOf(error) === 409) return; // another replica (or an earlier attempt) reported the same decision
    logger.warn(
      { err: error, [subject.kind === 'Node' ? 'node' : 'pv']: subject.name, reason: event.reason },
      `could not record an Event on the ${subject.kind}`,
    );
  }
}
