import { pino, type DestinationStream, type Logger } from 'pino';
import type { LogLevel } from './config.js';

export type { Logger };

/**
 * JSON logs. Nothing here logs headers or bodies; the redaction list is a second line of defence
 * for secrets that might reach a log object by mistake.
 */
export function createLogger(level: LogLevel, destination?: DestinationStream): Logger {
  const options = {
    level,
    base: { service: 'custody' },
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
  if (destination) return pino(options, destination);
  // Asynchronous writes: a blocking write per access-log line costs the event loop more than
  // the request it describes. Flushed on exit.
  const stdout = pino.destination({ sync: false });
  process.on('exit', () => stdout.flushSync());
  return pino(options, stdout);
}
