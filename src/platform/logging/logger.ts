import { writeSync } from 'node:fs';
import { pino, type DestinationStream, type Logger } from 'pino';
import type { LogLevel } from '../config/config.js';

export type { Logger };

/**
 * JSON logs. Nothing here logs headers or bodies; the redaction list is a second line of defence
 * for secrets that might reach a log object by mistake.
 */
export function createLogger(level: LogLevel, destination?: DestinationStream): Logger {
  const base = { level, base: { service: 'custody' } };
  const options = {
    ...base,
    redact: {
      paths: [
        'authorization',
        '*.authorization',
        'headers.authorization',
        'req.headers.authorization',
        'token',
        '*.token',
        'projectKey',
        '*.projectKey',
        'secret',
        '*.secret',
        'walletWebhookSecret',
        '*.walletWebhookSecret',
        'password',
        '*.password',
        'databaseUrl',
        '*.databaseUrl',
      ],
      censor: '[redacted]',
    },
  };
  const target = destination ?? stdoutDestination();
  const log = pino(options, target);
  accessTargets.set(log, target);
  return log;
}

/** The size of the blocks log lines are written in. */
const BLOCK_CHARS = 8192;

/**
 * Asynchronous, buffered writes: lines are written in blocks of up to 8 KiB, at the latest
 * every 200 ms, and at exit. A write per access-log line cost the service about 7% of the
 * instructions of a sign-in (bench/README.md). A SIGKILL can lose the last 200 ms of lines.
 *
 * The lines are joined into a block here, in order, and each block handed to sonic-boom (pino's
 * destination) at once. sonic-boom's own buffering (`minLength`) appends each line to its pending
 * chunk and then measures the whole chunk's UTF-8 length, which copies the chunk into a flat
 * string on every line: with an access line per request that was ~7 KB of garbage and a scan of
 * ~4 KB per request (bench/README.md, fifth session).
 */
export class BlockWriter implements DestinationStream {
  #lines: string[] = [];
  #chars = 0;

  /**
   * `out` takes each block (asynchronously); `last`, at exit, writes what is still pending
   * synchronously, after everything handed to `out` before.
   */
  constructor(
    private readonly out: { write(block: string): unknown },
    private readonly last: (block: string) => void,
  ) {}

  write(line: string): void {
    this.#lines.push(line);
    this.#chars += line.length;
    if (this.#chars >= BLOCK_CHARS) this.flush();
  }

  #take(): string {
    const block = this.#lines.join('');
    this.#lines = [];
    this.#chars = 0;
    return block;
  }

  /** Hands the pending lines on as one block. */
  flush(): void {
    if (this.#lines.length > 0) this.out.write(this.#take());
  }

  /** At exit: everything still pending, written before returning. */
  flushSync(): void {
    this.last(this.#take());
  }
}

function stdoutDestination(): DestinationStream {
  const STDOUT = 1;
  const stdout = pino.destination({ dest: STDOUT, sync: false });
  const writer = new BlockWriter(stdout, (block) => {
    // sonic-boom's own pending writes first, then ours, synchronously (the event loop is over).
    stdout.flushSync();
    if (block !== '') writeSync(STDOUT, block);
  });
  setInterval(() => writer.flush(), 200).unref();
  process.on('exit', () => {
    try {
      writer.flushSync();
    } catch {
      // stdout closed or not writable now: nothing more can be written.
    }
  });
  return writer;
}

const accessTargets = new WeakMap<Logger, DestinationStream>();

/** Request ids (ours, or a caller's checked against [A-Za-z0-9._:-]) and HTTP methods (tokens) need no escaping; anything else is escaped. */
const PLAIN = /^[A-Za-z0-9._:-]*$/;
const quoted = (s: string): string => (PLAIN.test(s) ? `"${s}"` : JSON.stringify(s));

/** One access line: request id, method, path, status and milliseconds. */
export type AccessLine = (requestId: string, method: string, path: string, status: number, ms: number) => void;

/**
 * The writer of the one line per request, at level info. For a logger of createLogger it builds
 * the line pino would write for `log.info({ requestId, method, path, status, ms }, 'request')`
 * (same fields, order and format; test/logger.test.ts compares the two) and hands it to the same
 * destination: its fields are fixed and hold no secret, and pino's generic serialisation and
 * redaction pass cost more than the rest of an access line (bench/README.md). Any other logger
 * gets the pino call.
 */
export function accessLine(log: Logger): AccessLine {
  const target = accessTargets.get(log);
  if (!target) return (requestId, method, path, status, ms) => log.info({ requestId, method, path, status, ms }, 'request');
  const info = pino.levels.values['info'] ?? 30;
  return (requestId, method, path, status, ms) => {
    if (log.levelVal > info) return;
    target.write(
      `{"level":${info},"time":${Date.now()},"service":"custody","requestId":${quoted(requestId)},"method":${quoted(method)},"path":${JSON.stringify(path)},"status":${status},"ms":${ms},"msg":"request"}\n`,
    );
  };
}
