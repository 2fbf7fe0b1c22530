import { ForbiddenError, UnauthorizedError } from '../errors.js';
import type { AppContext } from '../http/context.js';
import type { Principal } from './principal.js';

export function principalOf(ctx: AppContext): Principal {
  const p = ctx.state.principal;
  if (!p) throw new UnauthorizedError();
  return p;
}

/** Writes need the `admin` role; a `read` token inside its scope gets 403 (outside it, 404 came first). */
export function requireAdmin(p: Principal): void {
  if (p.role !== 'admin') throw new ForbiddenError('This token has the read role; writes need an admin token.');
}

export function requireOperator(p: Principal): void {
  if (p.scope !== 'operator') throw new ForbiddenError('Only the operator token may do this.');
}

/** Organisation-level management (projects, keys, tokens) is for the operator and organisation tokens. */
export function requireOrganisationScope(p: Principal): void {
  if (p.scope === 'project') throw new ForbiddenError('A project token may not do this; use an organisation token.');
}
