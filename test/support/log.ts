import { Writable } from 'node:stream';

/** A destination that keeps every line written to it: the text, and its lines parsed. */
export function sink(): { stream: Writable; text: () => string; lines: () => Array<Record<string, unknown>> } {
  let text = '';
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      text += chunk.toString('utf8');
      done();
    },
  });
  return {
    stream,
    text: () => text,
    lines: () =>
      text
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as Record<string, unknown>),
  };
}
