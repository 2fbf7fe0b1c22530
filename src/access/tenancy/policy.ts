import type { Principal, TokenRole } from '../auth/principal.js';
import { ForbiddenError } from '../../platform/http/errors.js';

type PrincipalScope = Principal['scope'];

/** Who may do an action: the token scopes it is open to, and the role (`read` admits every role; `admin` and `signer` only themselves). */
export interface Permission {
  readonly scopes: readonly PrincipalScope[];
  readonly role: TokenRole;
}

const ANY: readonly PrincipalScope[] = ['operator', 'organisation', 'project'];
const ORGANISATION: readonly PrincipalScope[] = ['operator', 'organisation'];
const OPERATOR: readonly PrincipalScope[] = ['operator'];
const PROJECT: readonly PrincipalScope[] = ['project'];

/**
 * Who may do what, in one table (docs/interface.md section 3). Reaching the resource comes first: a
 * tenant or project outside the token's scope is 404 before any of this is asked (access/tenancy/resolve.ts).
 */
export const permissions = {
  'organisation.list': { scopes: ORGANISATION, role: 'read' },
  'organisation.create': { scopes: OPERATOR, role: 'admin' },
  'organisation.read': { scopes: ORGANISATION, role: 'read' },
  'organisation.rename': { scopes: ORGANISATION, role: 'admin' },
  'organisation.delete': { scopes: OPERATOR, role: 'admin' },
  'organisation.undelete': { scopes: OPERATOR, role: 'admin' },
  'audit.read': { scopes: ORGANISATION, role: 'admin' },
  'token.list': { scopes: ORGANISATION, role: 'read' },
  'token.create': { scopes: ORGANISATION, role: 'admin' },
  'token.revoke': { scopes: ORGANISATION, role: 'admin' },
  'project.list': { scopes: ORGANISATION, role: 'read' },
  'project.create': { scopes: ORGANISATION, role: 'admin' },
  'project.read': { scopes: ANY, role: 'read' },
  'project.change': { scopes: ANY, role: 'admin' },
  'project.delete': { scopes: ORGANISATION, role: 'admin' },
  'project.rotateKey': { scopes: ORGANISATION, role: 'admin' },
  'project.rotateWalletWebhookSecret': { scopes: ORGANISATION, role: 'admin' },
  'project.checkIssuer': { scopes: ANY, role: 'read' },
  'wallet.read': { scopes: ANY, role: 'read' },
  'membership.read': { scopes: ANY, role: 'read' },
  'membership.write': { scopes: ANY, role: 'admin' },
  'webhook.catalogue': { scopes: ANY, role: 'read' },
  'webhook.read': { scopes: ANY, role: 'read' },
  'webhook.write': { scopes: ANY, role: 'admin' },
  'delivery.read': { scopes: ANY, role: 'read' },
  'delivery.retry': { scopes: ANY, role: 'admin' },
  'policy.read': { scopes: ANY, role: 'read' },
  'policy.write': { scopes: ANY, role: 'admin' },
  // Whoever writes policies is not who signs: only signer tokens, which are project tokens.
  'wallet.sign': { scopes: PROJECT, role: 'signer' },
  // A send is a signature: the same rule. Cancels and fee bumps are signatures too.
  'transaction.send': { scopes: PROJECT, role: 'signer' },
  'transaction.read': { scopes: ANY, role: 'read' },
} as const satisfies Record<string, Permission>;

export type Action = keyof typeof permissions;

function scopeRefusal(allowed: readonly PrincipalScope[]): string {
  if (allowed.length === 1 && allowed[0] === 'project') return 'Only a project token of the signer role may do this.';
  if (allowed.length === 1) return 'Only the operator token may do this.';
  return 'A project token may not do this; use an organisation token.';
}

/** Whether the principal may do the action; the 403 answers say which rule refused. */
export function refusal(p: Principal, action: Action): string | undefined {
  const rule: Permission = permissions[action];
  if (!rule.scopes.includes(p.scope)) return scopeRefusal(rule.scopes);
  if (rule.role === 'admin' && p.role !== 'admin') return `This token has the ${p.role} role; writes need an admin token.`;
  if (rule.role === 'signer' && p.role !== 'signer') return 'Signing needs a token of the signer role; admin does not imply it.';
  return undefined;
}

export function authorize(p: Principal, action: Action): void {
  const refused = refusal(p, action);
  if (refused !== undefined) throw new ForbiddenError(refused);
}
