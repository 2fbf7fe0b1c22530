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
  return destination ? pino(options, destination) : pino(options);
}
