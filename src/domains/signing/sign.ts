import type { Caller } from '../../../contract/index.js';
import type { Knex } from 'knex';
import type { Clock } from '../../platform/runtime/clock.js';
import { AppError } from '../../platform/http/errors.js';
import type { ProjectUid, SignerClient } from '../../platform/signer/client.js';
import type { DecisionLog } from './decisions.js';
import type { WalletRow } from '../wallets/repository.js';
import { limitName, releaseSignature, reserveSignature, type PolicyLimits } from './policies/limits.js';

export interface SignDeps {
  db: Knex;
  signer: SignerClient;
  now: Clock;
  limits: PolicyLimits;
  decisions: DecisionLog;
}

export interface SignCaller {
  caller: Caller;
  /** Who asked, as the audit log names callers (`token:<id>`, `project:<id>` for the user present). */
  actor: string;
  requestId: string | null;
}

/** How a send is counted against the policy's budgets: its maximum cost, and the place of the attempt it replaces. */
export interface SendBudget {
  cost: bigint;
  replacing?: number;
}

/** What the signer decided, recorded: the answer and the place taken under the limits, or the denial. */
export type SignOutcome =
  { allowed: true; result: Record<string, unknown>; digest: string; reserved: number | undefined } | { allowed: false; message: string };

/**
 * Asks the signer to sign `operation` with the wallet's key (docs/signing.md): the signer reads it,
 * checks the key's project and the policy before it decrypts. Every decision is recorded, allowed
 * or denied, before the answer (decisions.ts): an audit entry (caller, wallet, method, digest,
 * rule, policy version; never the payload) and a `wallet.signature.created` or `.denied` event.
 * A denial is `403 policy_denied` naming the rule.
 */
export async function signWithWallet(
  deps: SignDeps,
  wallet: WalletRow & { address: string },
  project: { id: number; uid: ProjectUid; organisation_id: number },
  operation: { method: string; params: unknown },
  who: SignCaller,
): Promise<Record<string, unknown>> {
  const outcome = await decideAndSign(deps, wallet, project, operation, who);
  if (!outcome.allowed) throw new AppError(403, 'policy_denied', 'Forbidden', outcome.message);
  return outcome.result;
}

/** As signWithWallet, answering a denial instead of throwing it (a send records it on its transaction); `budget` for a transaction. */
export async function decideAndSign(
  deps: SignDeps,
  wallet: WalletRow & { address: string },
  project: { id: number; uid: ProjectUid; organisation_id: number },
  operation: { method: string; params: unknown },
  who: SignCaller,
  budget?: SendBudget,
): Promise<SignOutcome> {
  if (wallet.project_id !== project.id) throw new Error('the wallet is not of the project given');
  const outcome = await askSigner(deps, wallet, project.uid, operation, who.caller, budget);
  const decision = {
    walletId: wallet.id,
    walletAddress: wallet.address,
    method: operation.method,
    digest: outcome.digest,
    caller: who.caller,
    rule: outcome.rule,
    policyVersion: outcome.policyVersion,
  };
  await deps.decisions.record({
    organisationId: project.organisation_id,
    projectId: wallet.project_id,
    walletId: wallet.id,
    actor: who.actor,
    requestId: who.requestId,
    type: outcome.allowed ? 'wallet.signature.created' : 'wallet.signature.denied',
    details: decision,
    at: new Date(deps.now()),
  });
  if (!outcome.allowed) {
    return {
      allowed: false,
      message:
        outcome.rule === null
          ? "No rule of the project's policy allows this."
          : outcome.byLimit
            ? `The project's policy limit is reached (${outcome.rule}).`
            : `Denied by the rule "${outcome.rule}" of the project's policy.`,
    };
  }
  return { allowed: true, result: outcome.result, digest: outcome.digest, reserved: outcome.reserved };
}

type Outcome = Awaited<ReturnType<SignerClient['sign']>> & { byLimit?: true; reserved?: number };

/**
 * The signer decides on the static rules; the API first takes a place under the policy's
 * rolling-window limits (counted on PostgreSQL, shared by every API process), given back when the
 * signer does not sign. A full limit is a denial naming it, unless a rule denies the operation
 * anyway (the dry run names that rule and gives the digest for the record).
 */
async function askSigner(
  deps: SignDeps,
  wallet: WalletRow,
  project: ProjectUid,
  operation: { method: string; params: unknown },
  caller: SignCaller['caller'],
  budget: SendBudget | undefined,
): Promise<Outcome> {
  const request = { caller, operation };
  const limits = await deps.limits.of(project, operation.method);
  if (limits.length === 0) return deps.signer.sign(wallet.key_id, project, request);
  const place = await reserveSignature(
    deps.db,
    {
      projectId: wallet.project_id,
      walletId: wallet.id,
      method: operation.method,
      ...(budget ? { cost: budget.cost, ...(budget.replacing ? { replacing: budget.replacing } : {}) } : {}),
    },
    limits,
    new Date(deps.now()),
  );
  if ('full' in place) {
    const dry = await deps.signer.evaluatePolicy(project, { caller, operation });
    const common = { allowed: false as const, digest: dry.digest, policyVersion: dry.policyVersion };
    return dry.allowed ? { ...common, rule: limitName(place.full), byLimit: true } : { ...common, rule: dry.rule };
  }
  let outcome: Outcome;
  try {
    outcome = await deps.signer.sign(wallet.key_id, project, request);
  } catch (err) {
    await releaseSignature(deps.db, place.reserved);
    throw err;
  }
  if (!outcome.allowed) await releaseSignature(deps.db, place.reserved);
  else if (budget?.replacing) await releaseSignature(deps.db, budget.replacing);
  return outcome.allowed ? { ...outcome, reserved: place.reserved } : outcome;
}
