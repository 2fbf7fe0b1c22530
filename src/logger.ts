import { pino, type DestinationStream, type Logger } from 'pino';
import type { LogLevel } from './config.js';

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

/**
 * Asynchronous, buffered writes: lines are written in blocks of up to 8 KiB, at the latest
 * every 200 ms, and at exit. A write per access-log line cost the service about 7% of the
 * instructions of a sign-in (bench/README.md). A SIGKILL can lose the last 200 ms of lines.
 */
function stdoutDestination(): DestinationStream {
  const stdout = pino.destination({ sync: false, minLength: 8192 });
  setInterval(() => {
    try {
      stdout.flush();
    } catch {
      // Not ready yet or already writing: the next tick flushes.
    }
  }, 200).unref();
  process.on('exit', () => stdout.flushSync());
  return stdout;
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
