import { createHash, randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import { principalOf } from '../auth/access.js';
import { principalKey } from '../auth/principal.js';
import type { Executor } from '../../platform/db/knex.js';
import { ConflictError, IdempotencyKeyReusedError, ValidationError } from '../../platform/http/errors.js';
import { claimKey, recordAad, releaseKey, storeResponse, type Reservation } from '../../platform/idempotency/repository.js';
import type { AppContext, AppMiddleware } from '../../platform/http/context.js';
import type { SecretBox } from '../../platform/crypto/secrets.js';
import { DEFAULT_BODY_LIMIT, readBody } from '../../platform/http/body.js';
import { sendProblem, toAppError } from '../../platform/http/problem.js';

const KEY = /^[\x20-\x7e]{1,255}$/;

const inProgress = () => new ConflictError('A request with this Idempotency-Key is still in progress.', 'request_in_progress');

/**
 * docs/interface.md section 2b, without holding a connection across the request (docs/decisions.md):
 * 1. the key's record is claimed by one committed statement, naming this request its owner for a
 *    lease (`idempotencyLeaseS`); a second request while it runs gets 409, one with another body
 *    422, one after the answer its replay;
 * 2. the handler runs on the pool, as it does without the header (its own transactions for what
 *    must be atomic);
 * 3. the answer is stored by the owner only: in the change's own transaction where the audit
 *    middleware opens one (so the change and its answer commit together, and a request that lost
 *    its record to a takeover commits nothing), otherwise in a statement of its own after the
 *    handler. A 5xx or an error gives the record up, so that a retry runs afresh.
 * Stored answers are sealed under DATA_ENCRYPTION_KEY (they carry shown-once secrets: API tokens,
 * project keys, webhook secrets), bound to their record; a replay opens them.
 */
export function idempotency(db: Knex, times: { ttlS: number; leaseS: number }, box: SecretBox): AppMiddleware {
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
    // Read already at the route's limit (access/endpoints/declare.ts mounts it before this); the default otherwise.
    await readBody(ctx, DEFAULT_BODY_LIMIT);
    const raw = (ctx.request as { rawBody?: unknown }).rawBody;
    const fingerprint = createHash('sha256')
      .update(`${ctx.method} ${ctx.originalUrl}\n${typeof raw === 'string' ? raw : ''}`)
      .digest('base64url');
    const record: Reservation = { principal, key: header, fingerprint, owner: randomUUID() };

    const claim = await claimKey(db, record, times);
    if (!claim.claimed) {
      const { held } = claim;
      if (held === undefined) throw inProgress();
      if (held.fingerprint !== fingerprint) throw new IdempotencyKeyReusedError();
      if (held.response_status === null) throw inProgress();
      ctx.status = held.response_status;
      ctx.body = held.response_body ? box.open(held.response_body, recordAad(principal, header, fingerprint)) : '';
      if (held.response_content_type) ctx.type = held.response_content_type;
      ctx.set('Idempotent-Replayed', 'true');
      return;
    }

    // Whether the answer went into the change's transaction (which then committed, unless the handler threw).
    let storedWithChange = false;
    ctx.state.idempotentAnswer = {
      storeIn: async (tx: Executor) => {
        if (ctx.status >= 500) return;
        // Taken over after the lease: the other request's change is the one to keep.
        if (!(await storeResponse(tx, record, answerOf(ctx, box, record)))) throw inProgress();
        storedWithChange = true;
      },
    };
    try {
      try {
        await next();
      } catch (err) {
        storedWithChange = false;
        const known = toAppError(err);
        if (!known || known.status >= 500) throw err;
        sendProblem(ctx, known, ctx.state.requestId);
      }
      if (ctx.status >= 500) {
        await releaseKey(db, record);
        return;
      }
      // A refusal, or an endpoint whose command commits on its own: the answer in a statement of its own.
      if (!storedWithChange) await storeResponse(db, record, answerOf(ctx, box, record));
    } catch (err) {
      await releaseKey(db, record).catch((e: unknown) =>
        ctx.state.log.warn({ err: e instanceof Error ? e.message : String(e) }, 'an Idempotency-Key record was not given up; it is free once its lease ends'),
      );
      throw err;
    } finally {
      ctx.state.idempotentAnswer = undefined;
    }
  };
}

/** The answer as it is stored: status, type and the body sealed to its record. */
function answerOf(ctx: AppContext, box: SecretBox, r: Reservation): { status: number; contentType: string; body: string } {
  const body = ctx.body === undefined || ctx.body === null ? '' : typeof ctx.body === 'string' ? ctx.body : JSON.stringify(ctx.body);
  return {
    status: ctx.status,
    contentType: ctx.response.type,
    body: body === '' ? '' : box.seal(body, recordAad(r.principal, r.key, r.fingerprint)),
  };
}
