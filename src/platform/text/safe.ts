/**
 * Text PostgreSQL can store and every peer can read: no NUL (a `text` value cannot hold one:
 * SQLSTATE 22021) and no unpaired UTF-16 surrogate (not encodable as UTF-8). Every string a
 * caller sends is held to this at validation (src/platform/http/validate.ts) and in the JWT's e-mail claim.
 */
export function safeText(s: string): boolean {
  return !s.includes('\u0000') && isWellFormed(s);
}

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

function isWellFormed(s: string): boolean {
  return !LONE_SURROGATE.test(s);
}

/**
 * The first string anywhere in a parsed JSON value (a key or a value) that is not `safeText`, as a
 * JSON Pointer. The pointer is assembled only for that string, on the way back: a walk over a
 * large body allocates nothing per value.
 */
export function unsafeTextAt(value: unknown): string | undefined {
  const at = firstUnsafe(value);
  return at?.map((segment) => `/${String(segment).replace(/~/g, '~0').replace(/\//g, '~1')}`).join('');
}

function firstUnsafe(value: unknown): Array<string | number> | undefined {
  if (typeof value === 'string') return safeText(value) ? undefined : [];
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const at = firstUnsafe(value[i]);
      if (at) {
        at.unshift(i);
        return at;
      }
    }
    return undefined;
  }
  if (value !== null && typeof value === 'object') {
    for (const k of Object.keys(value)) {
      if (!safeText(k)) return [k];
      const at = firstUnsafe((value as Record<string, unknown>)[k]);
      if (at) {
        at.unshift(k);
        return at;
      }
    }
  }
  return undefined;
}
