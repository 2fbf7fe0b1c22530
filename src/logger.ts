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
  accessLoggers.set(log, pino(base, target));
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

const accessLoggers = new WeakMap<Logger, Logger>();

/**
 * The logger for the one line per request: the same destination and level, without the
 * redaction pass (its fields are fixed and hold no secret; redaction walks every object logged).
 */
export function accessLogger(log: Logger): Logger {
  return accessLoggers.get(log) ?? log;
}
