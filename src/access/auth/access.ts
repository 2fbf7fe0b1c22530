import { UnauthorizedError } from '../../platform/http/errors.js';
import type { AppContext } from '../../platform/http/context.js';
import type { Principal } from './principal.js';

/** The caller of an API-token endpoint (set by `authenticate`); who may do what is access/tenancy/policy.ts. */
export function principalOf(ctx: AppContext): Principal {
  const p = ctx.state.principal;
  if (!p) throw new UnauthorizedError();
  return p;
}
