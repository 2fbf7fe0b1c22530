import { createHmac, randomBytes } from 'node:crypto';
import type { Knex } from 'knex';
import type { Clock } from '../../platform/runtime/clock.js';
import { constantTimeEqual, hashSecret } from '../../platform/crypto/secrets.js';
import { ForbiddenError } from '../../platform/http/errors.js';
import type { AppContext } from '../../platform/http/context.js';

/** Writes a sign-in's or sign-out's audit entry in the transaction of the change (the console's, which knows the audit log). */
export type SessionAudit = (trx: Knex.Transaction) => Promise<void>;

/** The console's cookie: the session secret, 32 random bytes in base64url. Over https it is `__Host-` prefixed, so no other host of the site can set it. */
export const SESSION_COOKIE = 'custody_session';
export const SECURE_SESSION_COOKIE = `__Host-${SESSION_COOKIE}`;
/** The header a console write carries its CSRF token in. */
export const CSRF_HEADER = 'X-CSRF-Token';
const SECRET_SHAPE = /^[A-Za-z0-9_-]{43}$/;
/** Methods that change nothing: a cookie alone may read, every other method needs the CSRF token too. */
const SAFE_METHODS: ReadonlySet<string> = new Set(['GET', 'HEAD', 'OPTIONS']);
/** Expired sessions removed per sign-in, so the table stays as small as its live sessions. */
const PRUNE_BATCH = 100;

/**
 * Console sessions (docs/console.md): an API token exchanged for a cookie that stands for it. The
 * table (console_sessions) holds hashes only; the session is as live as its token, which the caller's
 * every request looks up again by its hash, so revoking the token ends its sessions at once.
 */
export class ConsoleSessions {
  constructor(
    private readonly db: Knex,
    private readonly ttlS: number,
    private readonly now: Clock,
    /** The cookie's name: SECURE_SESSION_COOKIE when the service is reached over https. */
    readonly cookie: string = SESSION_COOKIE,
  ) {}

  /**
   * A new session for the token whose hash is given: its secret (for the cookie only) and expiry.
   * The session the browser held before, if any, ends with it: a cookie replaced is a cookie gone.
   */
  async start(tokenHash: Buffer, audit: SessionAudit, previous?: Buffer): Promise<{ secret: Buffer; expiresAt: Date }> {
    const secret = randomBytes(32);
    const now = new Date(this.now());
    const expiresAt = new Date(now.getTime() + this.ttlS * 1000);
    await this.db.transaction(async (trx) => {
      // Sign-ins running at once each take other rows.
      await trx.raw(
        `DELETE FROM console_sessions WHERE id IN (
           SELECT id FROM console_sessions WHERE expires_at < ? ORDER BY expires_at LIMIT ${PRUNE_BATCH} FOR UPDATE SKIP LOCKED)`,
        [now],
      );
      if (previous)
        await trx('console_sessions')
          .where({ session_hash: hashSecret(previous) })
          .delete();
      await trx('console_sessions').insert({ session_hash: hashSecret(secret), token_hash: tokenHash, created_at: now, expires_at: expiresAt });
      await audit(trx);
    });
    return { secret, expiresAt };
  }

  /** The token hash and expiry of a live session, or undefined. */
  async find(secret: Buffer): Promise<{ tokenHash: Buffer; expiresAt: Date } | undefined> {
    const row = await this.db('console_sessions')
      .where({ session_hash: hashSecret(secret) })
      .where('expires_at', '>', new Date(this.now()))
      .first<{ token_hash: Buffer; expires_at: Date } | undefined>('token_hash', 'expires_at');
    return row ? { tokenHash: row.token_hash, expiresAt: row.expires_at } : undefined;
  }

  /** Ends a session (sign-out), audited; ending one that is over already changes nothing. */
  async end(secret: Buffer, audit: SessionAudit): Promise<void> {
    await this.db.transaction(async (trx) => {
      const ended = await trx('console_sessions')
        .where({ session_hash: hashSecret(secret) })
        .delete();
      if (ended > 0) await audit(trx);
    });
  }

  /** The session secret of the request's cookie, when it has the shape of one. */
  secretOf(ctx: AppContext): Buffer | undefined {
    const value = ctx.cookies.get(this.cookie);
    return value !== undefined && SECRET_SHAPE.test(value) ? Buffer.from(value, 'base64url') : undefined;
  }
}

/** The session's CSRF token: derived from its secret, so it is never stored and dies with the session. */
export function csrfOf(secret: Buffer): string {
  return createHmac('sha256', secret).update('custody console csrf').digest('base64url');
}

/** A write authenticated by the cookie must carry the session's CSRF token; refused before anything is looked up. */
export function requireCsrf(ctx: AppContext, secret: Buffer): void {
  if (SAFE_METHODS.has(ctx.method)) return;
  const given = Buffer.from(ctx.get(CSRF_HEADER), 'utf8');
  if (!constantTimeEqual(given, Buffer.from(csrfOf(secret), 'utf8')))
    throw new ForbiddenError(`A console write needs the session's CSRF token in the ${CSRF_HEADER} header.`);
}
