import { AppError, ConflictError, DependencyUnavailableError, ValidationError } from '../http/errors.js';
import { TenantShareTimeoutError } from './share.js';

const UNREACHABLE_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'ENOTFOUND', 'EAI_AGAIN', 'EPIPE', 'EHOSTUNREACH']);

/**
 * Maps a database failure to the answer the caller should get, by SQLSTATE or socket error code,
 * never by message text. Returns undefined for anything that is a bug of ours (a bare 500).
 */
export function mapDatabaseError(err: unknown): AppError | undefined {
  if (typeof err !== 'object' || err === null) return undefined;
  const e = err as { code?: unknown; name?: unknown; message?: unknown };
  const code = typeof e.code === 'string' ? e.code : '';
  if (code === '23505') return new ConflictError('The resource already exists.');
  // Character data the database cannot hold or convert (22021 character_not_in_repertoire, 22P05
  // untranslatable_character, 22026 string_data_length_mismatch): validation refuses these first;
  // anything that slips past is still the caller's input, not our fault.
  if (code === '22021' || code === '22P05' || code === '22026') {
    return new ValidationError('The request holds characters that cannot be stored (a NUL or an invalid sequence).', undefined, 'invalid_characters');
  }
  // Deadlock or serialization failure: the database aborted this request in favour of a concurrent one.
  if (isTransientConflict(err)) {
    return new AppError(
      503,
      'dependency_unavailable',
      'Service Unavailable',
      'The request collided with a concurrent one and was rolled back; retry.',
      undefined,
      {
        'Retry-After': '1',
      },
    );
  }
  // Class 08: connection exception; 57P01-57P03: admin shutdown, crash shutdown, cannot connect now;
  // 53300: too many connections.
  if (code.startsWith('08') || /^57P0[1-3]$/.test(code) || code === '53300' || UNREACHABLE_CODES.has(code)) {
    return new DependencyUnavailableError('database');
  }
  // The pool's acquire timeout, or the wait for a tenant's share of the pool (share.ts).
  if (e.name === 'KnexTimeoutError' || err instanceof TenantShareTimeoutError) return new DependencyUnavailableError('database');
  // node-postgres reports a dropped socket without a code (knex prefixes the query to the message).
  if (typeof e.message === 'string' && /(Connection terminated|connection error and is not queryable|Client was closed and is not queryable)/.test(e.message)) {
    return new DependencyUnavailableError('database');
  }
  return undefined;
}

/**
 * A failure that may be one row's fault, not the statement's: class 22 (a value the column cannot
 * hold) or 23 (a constraint the row breaks). A group of rows that failed so is written again row by row.
 */
export const isRowFault = (err: unknown): boolean => {
  const code = typeof err === 'object' && err !== null ? (err as { code?: unknown }).code : undefined;
  return typeof code === 'string' && (code.startsWith('22') || code.startsWith('23'));
};

export const isUniqueViolation = (err: unknown): boolean => typeof err === 'object' && err !== null && (err as { code?: unknown }).code === '23505';

/** 40P01 deadlock, 40001 serialization failure: safe to run the whole transaction again. */
export const isTransientConflict = (err: unknown): boolean => {
  const code = typeof err === 'object' && err !== null ? (err as { code?: unknown }).code : undefined;
  return code === '40P01' || code === '40001';
};
