import { createHash } from 'node:crypto';
import type { Knex } from 'knex';
import { principalOf } from '../auth/access.js';
import { principalKey } from '../auth/principal.js';
import { ConflictError, IdempotencyKeyReusedError, ValidationError } from '../errors.js';
import { lockKey, reserveKey, restartKey, storeResponse } from '../idempotency/repository.js';
import type { AppMiddleware } from './context.js';
import type { SecretBox } from '../crypto/secrets.js';
import { DEFAULT_BODY_LIMIT, readBody } from './body.js';
import { sendProblem, toAppError } from './problem.js';

const KEY = /^[\x20-\x7e]{1,255}$/;
const LOCK_NOT_AVAILABLE = '55P03';

/**
 * CONTRACT.md section 2b. The request runs inside a transaction that holds the key's row lock
 * and stores the answer before committing, so the change and its stored answer commit together:
 * a crash leaves neither, and a retry after it runs the request afresh. A second request while
 * the first holds the lock gets 409; 5xx answers are never stored.
 */
/** What a stored answer is sealed to: another record's ciphertext does not open here. */
export const recordAad = (principal: string, key: string, fingerprint: string) => `custody:idempotency:v1:${principal}:${fingerprint}:${key}`;

/**
 * Stored answers are sealed under DATA_ENCRYPTION_KEY (answers carry shown-once secrets: API
 * tokens, project keys, webhook secrets), bound to their record; a replay opens them.
 */
export function idempotency(db: Knex, ttlS: number, box: SecretBox): AppMiddleware {
  return async (ctx, next) => {
    const header = ctx.headers['idempotency-key'];
    if (header === undefined) {
      await next();
      return;
    }
    if (typeof header !== 'string' || !KEY.test(header)) {
      throw new ValidationError('Idempotency-Key must be 1 to 255 printable ASCII characters.', [
        { path: '/Idempotency-Key', message: 'must be 1 to 255 printable ASCII characters' },
      ]);
    }
    // A user endpoint's records are that user's; a token endpoint's, the token's.
    const principal = ctx.state.userKey ?? principalKey(principalOf(ctx));
    // Read already at the route's limit (http/declare.ts mounts it before this); the default otherwise.
    await readBody(ctx, DEFAULT_BODY_LIMIT);
    const raw = (ctx.request as { rawBody?: unknown }).rawBody;
    const fingerprint = createHash('sha256')
      .update(`${ctx.method} ${ctx.originalUrl}\n${typeof raw === 'string' ? raw : ''}`)
      .digest('base64url');
    await reserveKey(db, principal, header, fingerprint, ttlS);

    const tx = await db.transaction();
    try {
      let row;
      try {
        row = await lockKey(tx, principal, header);
      } catch (err) {
        if ((err as { code?: unknown }).code === LOCK_NOT_AVAILABLE) {
          throw new ConflictError('A request with this Idempotency-Key is still in progress.', 'request_in_progress');
        }
        throw err;
      }
      if (!row || row.expired) {
        await restartKey(tx, principal, header, fingerprint, ttlS);
      } else if (row.fingerprint !== fingerprint) {
        throw new IdempotencyKeyReusedError();
      } else if (row.response_status !== null) {
        ctx.status = row.response_status;
        ctx.body = row.response_body ? box.open(row.response_body, recordAad(principal, header, fingerprint)) : '';
        if (row.response_content_type) ctx.type = row.response_content_type;
        ctx.set('Idempotent-Replayed', 'true');
        await tx.commit();
        return;
      }

      ctx.state.db = tx;
      try {
        await next();
      } catch (err) {
        const known = toAppError(err);
        if (!known || known.status >= 500) throw err;
        sendProblem(ctx, known, ctx.state.requestId);
      }
      if (ctx.status >= 500) return; // not stored; `finally` rolls the change back
      const body = ctx.body === undefined || ctx.body === null ? '' : typeof ctx.body === 'string' ? ctx.body : JSON.stringify(ctx.body);
      await storeResponse(tx, principal, header, {
        status: ctx.status,
        contentType: ctx.response.type,
        body: body === '' ? '' : box.seal(body, recordAad(principal, header, fingerprint)),
      });
      await tx.commit();
    } finally {
      if (!tx.isCompleted()) await tx.rollback().catch(() => undefined);
    }
  };
}
