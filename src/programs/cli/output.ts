/** What the CLI prints: aligned tables for people, JSON for scripts, progress on stderr. */
export interface Output {
  json: boolean;
  /** A list of records as a table (or a JSON array). */
  table(rows: Array<Record<string, unknown>>, columns: string[]): void;
  /** One record as `key  value` lines (or a JSON object). */
  record(value: Record<string, unknown>): void;
  /** A line for people only (stderr, so --json output stays clean). */
  note(line: string): void;
  /** One value alone on stdout, for `$(custody …)` in a shell (the whole answer with --json). */
  value(text: string, answer: Record<string, unknown>): void;
}

const cell = (v: unknown): string => (v === null || v === undefined ? '-' : typeof v === 'string' ? v : JSON.stringify(v));

export function output(json: boolean, out: NodeJS.WritableStream = process.stdout, err: NodeJS.WritableStream = process.stderr): Output {
  return {
    json,
    table(rows, columns) {
      if (json) {
        out.write(`${JSON.stringify(rows, null, 2)}\n`);
        return;
      }
      if (rows.length === 0) {
        out.write('(none)\n');
        return;
      }
      const cells = rows.map((r) => columns.map((c) => cell(r[c])));
      const widths = columns.map((c, i) => Math.max(c.length, ...cells.map((row) => row[i]?.length ?? 0)));
      const line = (values: string[]) =>
        values
          .map((v, i) => v.padEnd(widths[i] ?? 0))
          .join('  ')
          .trimEnd();
      out.write(`${line(columns)}\n${line(widths.map((w) => '-'.repeat(w)))}\n${cells.map(line).join('\n')}\n`);
    },
    record(value) {
      if (json) {
        out.write(`${JSON.stringify(value, null, 2)}\n`);
        return;
      }
      const width = Math.max(...Object.keys(value).map((k) => k.length));
      out.write(
        `${Object.entries(value)
          .map(([k, v]) => `${k.padEnd(width)}  ${cell(v)}`)
          .join('\n')}\n`,
      );
    },
    note(line) {
      err.write(`${line}\n`);
    },
    value(text, answer) {
      out.write(json ? `${JSON.stringify(answer, null, 2)}\n` : `${text}\n`);
    },
  };
}
