import { UnauthorizedError } from '../errors.js';
import type { AppContext } from '../http/context.js';
import type { Principal } from './principal.js';

/** The caller of an API-token endpoint (set by `authenticate`); who may do what is tenancy/policy.ts. */
export function principalOf(ctx: AppContext): Principal {
  const p = ctx.state.principal;
  if (!p) throw new UnauthorizedError();
  return p;
}
