import { SignerError } from './errors.js';
import { duplicateName } from '../contract/index.js';
import { LIMITS } from './limits.js';
import { CALLERS, type Caller } from '../contract/index.js';
import { projectIdOf } from './key-id.js';
import { someNames, type Json } from './sign/input.js';
import type { Meter } from './sign/meter.js';
import { readOperation, type OperationData } from './sign/operation.js';

/**
 * The request bodies around an operation, read the same way on the main thread and on a worker
 * thread (keyvault/read-pool.ts): `sign` is `{ projectId, caller, operation }`, `evaluate` is
 * `{ caller, operation }` (its project is in the path).
 */
export type RequestKind = 'sign' | 'evaluate';

export interface Envelope {
  /** `sign` only. */
  projectId?: string;
  caller: Caller;
}

/** An object with only `allowed` fields (invalid_request), naming at most a few unknown ones. */
export function fields(body: unknown, allowed: readonly string[]): Json {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw new SignerError('invalid_request', 'body must be an object');
  const unknown: string[] = [];
  for (const k in body) {
    if (allowed.includes(k)) continue;
    unknown.push(k);
    if (unknown.length > LIMITS.refusal.names) break;
  }
  if (unknown.length > 0) throw new SignerError('invalid_request', `unknown fields: ${someNames(unknown)}`);
  return body as Json;
}

export function callerOf(v: unknown): Caller {
  if (!CALLERS.some((k) => k === v)) throw new SignerError('invalid_request', `caller must be ${CALLERS.map((k) => `"${k}"`).join(' or ')}`);
  return v as Caller;
}

/** JSON text with no member name repeated within an object (read one way here, another elsewhere), or invalid_request. */
export function parseBody(raw: Uint8Array): unknown {
  const text = Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength).toString('utf8');
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new SignerError('invalid_request', 'body is not JSON');
  }
  const dup = duplicateName(text);
  if (dup) throw new SignerError('invalid_request', `body repeats the member name "${dup.name.slice(0, 64)}" at ${dup.pointer.slice(0, 256)}`);
  return parsed;
}

/** A parsed body of `kind`: the envelope checked first (its refusals come before the operation's), then the operation read. */
export function readRequest(kind: RequestKind, body: unknown, meter: Meter): { envelope: Envelope; data: OperationData; message?: Json } {
  const b = fields(body, kind === 'sign' ? ['projectId', 'caller', 'operation'] : ['caller', 'operation']);
  const envelope: Envelope =
    kind === 'sign' ? { projectId: projectIdOf(b['projectId'], 'projectId'), caller: callerOf(b['caller']) } : { caller: callerOf(b['caller']) };
  return { envelope, ...readOperation(b['operation'], meter) };
}
