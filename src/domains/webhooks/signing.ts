import { createHmac } from 'node:crypto';

// Decoded keys by secret (bounded): deliveries sign thousands of bodies with a few secrets.
const keys = new Map<string, Buffer>();

/** The signing key of a secret (docs/interface.md section 8): whsec_ secrets are base64 bytes, others their UTF-8 bytes. */
export function signingKey(secret: string): Buffer {
  let key = keys.get(secret);
  if (!key) {
    key = secret.startsWith('whsec_') ? Buffer.from(secret.slice('whsec_'.length), 'base64') : Buffer.from(secret, 'utf8');
    if (keys.size >= 1_000) keys.clear();
    keys.set(secret, key);
  }
  return key;
}

/**
 * Standard Webhooks headers for one attempt: `webhook-id` stable across attempts, a fresh
 * `webhook-timestamp`, and one `v1,` signature per live secret (two during a rotation).
 */
export function signatureHeaders(messageId: string, timestampS: number, body: string, secrets: string[]): Record<string, string> {
  const signed = `${messageId}.${timestampS}.${body}`;
  const signatures = secrets.map((s) => `v1,${createHmac('sha256', signingKey(s)).update(signed, 'utf8').digest('base64')}`);
  return { 'webhook-id': messageId, 'webhook-timestamp': String(timestampS), 'webhook-signature': signatures.join(' ') };
}
