import { Type, type Field } from 'protobufjs';
import { CSI_PACKAGE, csiRoot } from './proto';

/**
 * The one place secrets are removed. csi.proto marks every field that may hold a secret with the CSI spec's
 * `csi_secret` field option, as the spec does; a message is safe to log or to pass on once the values of every
 * such field in it, at any depth, are masked. The fields are found by reflection over the message's type, not by
 * their names, so a secret field the spec adds is masked as soon as csi.proto carries it.
 */
const MASK = '***';
const SECRET_OPTION = `.${CSI_PACKAGE}.csi_secret`;

/** A field of a type that needs more than a copy: its values masked, or the messages in it redacted. */
type Step = { field: Field; mask: true } | { field: Field; mask: false; type: Type };

/** Per message type, the fields to mask or descend into; built on a type's first redaction. */
const plans = new Map<Type, Step[]>();
const types = new Map<string, Type>();

/**
 * A copy of `message`, an object of CSI message type `typeName` (for example `csi.v1.CreateVolumeRequest`) as
 * the gRPC loader gives it, with the value of every csi_secret field replaced by `***`: a map keeps its keys, a
 * list its length. A message whose type can hold no secret is returned as it is; nothing is changed in place.
 * Should the type not be found, the whole message is `***`: a log line without the request, never a secret in
 * it, nor a throw on the path that answers the call.
 */
export function redactSecrets<T>(message: T, typeName: string): T {
  let type = types.get(typeName);
  if (!type) {
    try {
      type = csiRoot().lookupType(typeName);
    } catch {
      return MASK as T;
    }
    types.set(typeName, type);
  }
  return redactMessage(type, message) as T;
}

function redactMessage(type: Type, message: unknown): unknown {
  if (message === null || typeof message !== 'object') return message;
  const steps = planOf(type);
  if (steps.length === 0) return message;
  const copy: Record<string, unknown> = { ...(message as Record<string, unknown>) };
  for (const step of steps) {
    const value = copy[step.field.name];
    if (value === null || value === undefined) continue;
    copy[step.field.name] = step.mask
      ? eachValue(step.field, value, () => MASK)
      : eachValue(step.field, value, (item) => redactMessage(step.type, item));
  }
  return copy;
}

/** `change` applied to each value the field holds: every value of a map, every item of a list, or the one value. */
function eachValue(field: Field, value: unknown, change: (item: unknown) => unknown): unknown {
  if (field.map && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value as object).map(([key, item]) => [key, change(item)]));
  }
  if (field.repeated && Array.isArray(value)) return value.map(change);
  return change(value);
}

function planOf(type: Type): Step[] {
  let plan = plans.get(type);
  if (!plan) {
    plan = [];
    for (const field of type.fieldsArray) {
      const child = messageType(field);
      if (isSecret(field)) plan.push({ field, mask: true });
      else if (child && holdsSecrets(child, new Set())) plan.push({ field, mask: false, type: child });
    }
    plans.set(type, plan);
  }
  return plan;
}

/** Whether a csi_secret field is reachable from `type` through its message fields (`seen` stops cycles). */
function holdsSecrets(type: Type, seen: Set<Type>): boolean {
  if (seen.has(type)) return false;
  seen.add(type);
  return type.fieldsArray.some((field) => {
    const child = messageType(field);
    return isSecret(field) || (child !== undefined && holdsSecrets(child, seen));
  });
}

function messageType(field: Field): Type | undefined {
  field.resolve();
  return field.resolvedType instanceof Type ? field.resolvedType : undefined;
}

/**
 * Whether the field sets csi_secret. protobufjs keeps a custom option under its name as written in the file
 * (`(csi_secret)`, or qualified); the name is resolved from the field's message, as protoc does.
 */
function isSecret(field: Field): boolean {
  return Object.entries(field.options ?? {}).some(([key, value]) => {
    const name = /^\((.+)\)$/.exec(key)?.[1];
    return value === true && name !== undefined && field.parent?.lookup(name)?.fullName === SECRET_OPTION;
  });
}
