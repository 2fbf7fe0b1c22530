/**
 * Text PostgreSQL can store and every peer can read: no NUL (a `text` value cannot hold one:
 * SQLSTATE 22021) and no unpaired UTF-16 surrogate (not encodable as UTF-8). Every string a
 * caller sends is held to this at validation (src/http/validate.ts) and in the JWT's e-mail claim.
 */
export function safeText(s: string): boolean {
  return !s.includes('\u0000') && isWellFormed(s);
}

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

function isWellFormed(s: string): boolean {
  return !LONE_SURROGATE.test(s);
}

/** The first string anywhere in a parsed JSON value that is not `safeText`, as a JSON Pointer. */
export function unsafeTextAt(value: unknown, pointer = ''): string | undefined {
  if (typeof value === 'string') return safeText(value) ? undefined : pointer;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const at = unsafeTextAt(value[i], `${pointer}/${i}`);
      if (at !== undefined) return at;
    }
    return undefined;
  }
  if (value !== null && typeof value === 'object') {
    for (const [k, v] of Object.entries(value)) {
      const escaped = k.replace(/~/g, '~0').replace(/\//g, '~1');
      if (!safeText(k)) return `${pointer}/${escaped}`;
      const at = unsafeTextAt(v, `${pointer}/${escaped}`);
      if (at !== undefined) return at;
    }
  }
  return undefined;
}
