/**
 * Transit's encrypt and decrypt carry key material as base64 inside JSON. Both directions are
 * done here on bytes, so a private key never becomes a JavaScript string (strings cannot be
 * zeroed and live until the collector gets to them): the request body is assembled in a Buffer,
 * and the plaintexts of a decrypt answer are cut out of the answer's bytes and decoded into
 * buffers before anything parses the rest. Every buffer that held key bytes is zeroed by its
 * owner: the request body after it is written, the answer after the plaintexts are taken out.
 */

const ALPHABET = Buffer.from('ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/', 'ascii');
const DECODE = new Int16Array(256).fill(-1);
ALPHABET.forEach((c, i) => (DECODE[c] = i));
const PAD = 0x3d; // '='

/** Standard base64 (with padding) of `bytes`, as ASCII bytes written into `out` at `at`; returns the end. */
export function base64Into(bytes: Uint8Array, out: Uint8Array, at: number): number {
  let o = at;
  let i = 0;
  for (; i + 2 < bytes.length; i += 3) {
    const n = ((bytes[i] ?? 0) << 16) | ((bytes[i + 1] ?? 0) << 8) | (bytes[i + 2] ?? 0);
    out[o++] = ALPHABET[(n >> 18) & 63] ?? 0;
    out[o++] = ALPHABET[(n >> 12) & 63] ?? 0;
    out[o++] = ALPHABET[(n >> 6) & 63] ?? 0;
    out[o++] = ALPHABET[n & 63] ?? 0;
  }
  const rest = bytes.length - i;
  if (rest > 0) {
    const n = ((bytes[i] ?? 0) << 16) | (rest === 2 ? (bytes[i + 1] ?? 0) << 8 : 0);
    out[o++] = ALPHABET[(n >> 18) & 63] ?? 0;
    out[o++] = ALPHABET[(n >> 12) & 63] ?? 0;
    out[o++] = rest === 2 ? (ALPHABET[(n >> 6) & 63] ?? 0) : PAD;
    out[o++] = PAD;
  }
  return o;
}

export const base64Length = (n: number): number => Math.ceil(n / 3) * 4;

/** Decodes base64 ASCII bytes `src[from, to)` into a new Buffer; undefined if they are not base64. */
export function decodeBase64(src: Uint8Array, from: number, to: number): Buffer | undefined {
  let end = to;
  while (end > from && src[end - 1] === PAD) end--;
  if ((to - from) % 4 !== 0 || to - end > 2) return undefined;
  const out = Buffer.alloc(Math.floor(((end - from) * 3) / 4));
  let bits = 0;
  let value = 0;
  let o = 0;
  for (let i = from; i < end; i++) {
    const d = DECODE[src[i] ?? 0] ?? -1;
    if (d < 0) {
      out.fill(0);
      return undefined;
    }
    value = (value << 6) | d;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out[o++] = (value >> bits) & 0xff;
    }
  }
  return out;
}

/** `{"batch_input":[{"context":"…","plaintext":"<base64>"},…]}` as bytes; the caller zeroes it once sent. */
export function encryptRequestBody(items: Array<{ context: string; plaintext: Uint8Array }>): Buffer {
  // Contexts are base64 of a key id (no secret, JSON-safe): only the plaintexts need care.
  const parts = items.map((it) => ({ head: Buffer.from(`{"context":${JSON.stringify(it.context)},"plaintext":"`, 'utf8'), plaintext: it.plaintext }));
  const open = Buffer.from('{"batch_input":[', 'ascii');
  const size = open.length + parts.reduce((n, p) => n + p.head.length + base64Length(p.plaintext.length) + 2, 0) + Math.max(0, parts.length - 1) + 2;
  const body = Buffer.alloc(size);
  let at = open.copy(body, 0);
  parts.forEach((p, i) => {
    if (i > 0) body[at++] = 0x2c; // ','
    at += p.head.copy(body, at);
    at = base64Into(p.plaintext, body, at);
    body[at++] = 0x22; // '"'
    body[at++] = 0x7d; // '}'
  });
  body[at++] = 0x5d; // ']'
  body[at++] = 0x7d; // '}'
  return body;
}

const PLAINTEXT_KEY = Buffer.from('"plaintext"', 'ascii');
const isSpace = (c: number | undefined) => c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d;

/**
 * Takes every `"plaintext":"<base64>"` value out of a decrypt answer: each is decoded into a
 * Buffer and its bytes in `answer` are overwritten with `A`, so the answer can then be parsed as
 * JSON (for errors and order) without holding a secret. Plaintexts are returned in answer order.
 */
export function takePlaintexts(answer: Buffer): Buffer[] {
  const found: Buffer[] = [];
  let from = 0;
  for (;;) {
    const key = answer.indexOf(PLAINTEXT_KEY, from);
    if (key < 0) return found;
    let i = key + PLAINTEXT_KEY.length;
    while (isSpace(answer[i])) i++;
    if (answer[i] !== 0x3a) {
      from = i;
      continue;
    }
    i++;
    while (isSpace(answer[i])) i++;
    if (answer[i] !== 0x22) {
      from = i;
      continue;
    }
    const start = i + 1;
    const end = answer.indexOf(0x22, start);
    if (end < 0) return found;
    const decoded = decodeBase64(answer, start, end);
    answer.fill(0x41, start, end); // 'A': valid JSON string content, no secret
    if (decoded === undefined) throw new Error('transit answered a plaintext that is not base64');
    found.push(decoded);
    from = end + 1;
  }
}
