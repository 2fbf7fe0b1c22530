import { isTransientConflict, isUniqueViolation } from '../../platform/db/pg-errors.js';
import type { Executor, Knex } from '../../platform/db/knex.js';
import { ADDRESS_RULE, checksumAddress } from '../../platform/eth/address.js';
import { ConflictError, NotFoundError, ValidationError, type FieldProblem } from '../../platform/http/errors.js';
import type { NewEvent } from '../webhooks/record.js';
import { recordEvents } from '../webhooks/record.js';
import type { Page } from '../../platform/http/pagination.js';
import type { ProjectRow } from '../projects/repository.js';
import { mapInTurns } from '../../platform/runtime/turns.js';
import { presentMembership, presentTransaction, statusOf } from './presenter.js';
import {
  appendTransactions,
  deleteMembership,
  insertMemberships,
  lockHolders,
  lockMembership,
  moveMembership,
  overrideMemberships,
  revokeMembership,
  viewMemberships,
  type MembershipRow,
  type NewTransaction,
  type TransactionRow,
} from './repository.js';

const UINT256_MAX = (1n << 256n) - 1n;

/** Runs `work` in a transaction, again (up to three times) when it lost a race it can win on retry. */
async function withRetries<T>(db: Executor, work: (tx: Knex.Transaction) => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await db.transaction(work);
    } catch (err) {
      if (attempt >= 3 || !(err instanceof RaceLost || isTransientConflict(err))) throw err;
    }
  }
}

/** An override item met a membership that a concurrent request committed after we looked. */
class RaceLost extends Error {}

function parseAddress(text: string, path: string, problems: FieldProblem[]): string {
  const address = checksumAddress(text);
  if (address === undefined) problems.push({ in: 'body', path, message: ADDRESS_RULE });
  return address ?? text;
}

/** A decimal uint256 (400 beyond 2^256 - 1); ids beyond what this deployment can hold simply do not exist (404). */
function parseTokenId(text: string): number | undefined {
  if (BigInt(text) > UINT256_MAX) {
    throw new ValidationError('tokenId is larger than 2^256 - 1.', [{ in: 'body', path: '/tokenId', message: 'must be a decimal unsigned 256-bit integer' }]);
  }
  const n = Number(text);
  return Number.isSafeInteger(n) && n > 0 ? n : undefined;
}

const placeKey = (walletLower: string, type: string) => `${walletLower} ${type}`;

export interface IssueItemInput {
  membershipType: string;
  walletAddress: string;
  expiration?: number | undefined;
  transferable?: boolean | undefined;
  override?: boolean | undefined;
}

interface IssueItem {
  membershipType: string;
  walletAddress: string;
  walletLower: string;
  expiration: number;
  transferable: boolean;
  override: boolean;
}

const membershipEvents = (record: ReturnType<typeof presentMembership>, change: string, extra: NewEvent[] = []): NewEvent[] => [
  ...extra,
  { type: 'membership.updated', data: { ...record, change } },
];

const transactionEvent = (t: TransactionRow): NewEvent => ({ type: 'transaction.created', data: presentTransaction(t) });

/**
 * `POST /membership/issue`: all or nothing. Items are checked first (400 with every problem);
 * then, in one transaction, the places they take are locked and any conflict is a 409 naming
 * each item; otherwise every item is minted (or, with `override`, updated in place) with its
 * ledger transaction and events. Returns the memberships in input order.
 */
export async function issueMemberships(db: Executor, project: ProjectRow, input: readonly IssueItemInput[], nowMs: number): Promise<MembershipRow[]> {
  const nowS = Math.floor(nowMs / 1000);
  const problems: FieldProblem[] = [];
  const seen = new Map<string, number>();
  const items: IssueItem[] = await mapInTurns(input, (raw, i) => {
    const walletAddress = parseAddress(raw.walletAddress, `/${i}/walletAddress`, problems);
    const expiration = raw.expiration ?? 0;
    if (expiration !== 0 && expiration <= nowS) problems.push({ in: 'body', path: `/${i}/expiration`, message: 'is in the past (use 0 for never)' });
    const walletLower = walletAddress.toLowerCase();
    const key = placeKey(walletLower, raw.membershipType);
    const first = seen.get(key);
    if (first !== undefined) {
      problems.push({ in: 'body', path: `/${i}`, message: `has the same walletAddress and membershipType as item ${first}` });
    } else {
      seen.set(key, i);
    }
    return {
      membershipType: raw.membershipType,
      walletAddress,
      walletLower,
      expiration,
      transferable: raw.transferable ?? false,
      override: raw.override ?? false,
    };
  });
  if (problems.length > 0) throw new ValidationError('Some items are invalid; nothing was issued. See errors.', problems);

  return withRetries(db, async (tx) => {
    const places = items.map((i) => ({ walletLower: i.walletLower, membershipType: i.membershipType }));
    const holders = new Map((await lockHolders(tx, project.id, places, nowS)).map((h) => [placeKey(h.wallet_lower, h.membership_type), h]));
    const conflicts: FieldProblem[] = [];
    items.forEach((item, i) => {
      const holder = holders.get(placeKey(item.walletLower, item.membershipType));
      if (holder && !item.override) {
        conflicts.push({
          in: 'body',
          path: `/${i}`,
          message: `${item.walletAddress} already holds an active ${item.membershipType} membership (tokenId ${holder.id}); set override to update it`,
        });
      }
    });
    if (conflicts.length > 0)
      throw new ConflictError('Some items conflict with active memberships; nothing was issued. See errors.', 'already_member', conflicts);

    const updates = items.flatMap((item) => {
      const holder = holders.get(placeKey(item.walletLower, item.membershipType));
      return holder ? [{ id: holder.id, expiration: item.expiration, transferable: item.transferable }] : [];
    });
    const fresh = items.filter((item) => !holders.has(placeKey(item.walletLower, item.membershipType)));
    const updated = await overrideMemberships(tx, updates);
    const inserted = await insertMemberships(tx, project.id, fresh);
    const byPlace = new Map([...updated, ...inserted].map((m) => [placeKey(m.wallet_lower, m.membership_type), m]));

    const lost = items.map((item, i) => ({ item, i })).filter(({ item }) => !byPlace.has(placeKey(item.walletLower, item.membershipType)));
    if (lost.some(({ item }) => item.override)) throw new RaceLost();
    if (lost.length > 0) {
      throw new ConflictError(
        'Some items conflict with memberships issued at the same moment; nothing was issued. See errors.',
        'already_member',
        lost.map(({ item, i }) => ({
          in: 'body' as const,
          path: `/${i}`,
          message: `${item.walletAddress} already holds an active ${item.membershipType} membership`,
        })),
      );
    }

    const rows = items.map((item) => byPlace.get(placeKey(item.walletLower, item.membershipType)) as MembershipRow);
    const minted = new Set(inserted.map((m) => m.id));
    const ledger = await appendTransactions(
      tx,
      project.id,
      rows.map((m): NewTransaction => ({
        type: minted.has(m.id) ? 'mint' : 'update',
        tokenId: m.id,
        membershipType: m.membership_type,
        from: minted.has(m.id) ? null : m.wallet_address,
        to: m.wallet_address,
      })),
    );
    const events = await mapInTurns(rows, (m, i) => {
      const record = presentMembership(m, nowS);
      const t = ledger[i] as TransactionRow;
      return minted.has(m.id)
        ? [...membershipEvents(record, 'issued', [{ type: 'membership.issued', data: record }]), transactionEvent(t)]
        : [...membershipEvents(record, 'overridden'), transactionEvent(t)];
    });
    await recordEvents(tx, project.id, events.flat(), new Date(nowMs));
    return rows;
  });
}

/**
 * `POST /membership/revoke`. Soft: revoked (and its place freed), idempotent; hard: removed for
 * good (returns null). Unknown tokenId → 404.
 */
export async function revokeMembershipCommand(
  db: Executor,
  project: ProjectRow,
  body: { tokenId: string; hardDelete?: boolean | undefined },
  nowMs: number,
): Promise<MembershipRow | null> {
  const nowS = Math.floor(nowMs / 1000);
  const id = parseTokenId(body.tokenId);
  return withRetries(db, async (tx) => {
    const row = id === undefined ? undefined : await lockMembership(tx, project.id, id);
    if (!row) throw new NotFoundError(`No membership with tokenId ${body.tokenId} in this project.`);
    if (body.hardDelete === true) {
      await deleteMembership(tx, row.id);
      const [t] = await appendTransactions(tx, project.id, [
        { type: 'delete', tokenId: row.id, membershipType: row.membership_type, from: row.wallet_address, to: null },
      ]);
      await recordEvents(
        tx,
        project.id,
        [...membershipEvents(presentMembership(row, nowS), 'deleted'), transactionEvent(t as TransactionRow)],
        new Date(nowMs),
      );
      return null;
    }
    // A repeated revoke changes nothing and emits nothing.
    if (row.revoked_at !== null) return row;
    const revoked = await revokeMembership(tx, row.id);
    const [t] = await appendTransactions(tx, project.id, [
      { type: 'burn', tokenId: row.id, membershipType: row.membership_type, from: row.wallet_address, to: null },
    ]);
    const record = presentMembership(revoked, nowS);
    await recordEvents(
      tx,
      project.id,
      [...membershipEvents(record, 'revoked', [{ type: 'membership.revoked', data: record }]), transactionEvent(t as TransactionRow)],
      new Date(nowMs),
    );
    return revoked;
  });
}

/**
 * `POST /membership/transfer`, checked in this order: addresses (400), `to` ≠ `from` (400),
 * unknown token (404), `from` not the holder (409 holder_mismatch), revoked or expired
 * (409 membership_inactive), not transferable (409 not_transferable), `to` already holds an
 * active membership of that type (409 already_member).
 */
export async function transferMembership(
  db: Executor,
  project: ProjectRow,
  body: { from: string; to: string; tokenId: string },
  nowMs: number,
): Promise<MembershipRow> {
  const nowS = Math.floor(nowMs / 1000);
  const problems: FieldProblem[] = [];
  const from = parseAddress(body.from, '/from', problems);
  const to = parseAddress(body.to, '/to', problems);
  if (problems.length === 0 && from === to) problems.push({ in: 'body', path: '/to', message: 'must differ from from' });
  if (problems.length > 0) throw new ValidationError('The transfer is invalid; see errors.', problems);
  const id = parseTokenId(body.tokenId);

  return withRetries(db, async (tx) => {
    const row = id === undefined ? undefined : await lockMembership(tx, project.id, id);
    if (!row) throw new NotFoundError(`No membership with tokenId ${body.tokenId} in this project.`);
    if (row.wallet_lower !== from.toLowerCase()) throw new ConflictError(`${from} does not hold membership ${body.tokenId}.`, 'holder_mismatch');
    const status = statusOf(row, nowS);
    if (status !== 'active') throw new ConflictError(`Membership ${body.tokenId} is ${status} and cannot be transferred.`, 'membership_inactive');
    if (!row.transferable) throw new ConflictError(`Membership ${body.tokenId} is not transferable.`, 'not_transferable');

    const place = { walletLower: to.toLowerCase(), membershipType: row.membership_type };
    const taken = () => new ConflictError(`${to} already holds an active ${row.membership_type} membership.`, 'already_member');
    if ((await lockHolders(tx, project.id, [place], nowS)).length > 0) throw taken();
    let moved: MembershipRow;
    try {
      moved = await moveMembership(tx, row.id, to);
    } catch (err) {
      // A concurrent issue to `to` committed between our check and the move.
      if (isUniqueViolation(err)) throw taken();
      throw err;
    }
    const [t] = await appendTransactions(tx, project.id, [
      { type: 'transfer', tokenId: row.id, membershipType: row.membership_type, from: row.wallet_address, to: moved.wallet_address },
    ]);
    const record = presentMembership(moved, nowS);
    const fromTo = { from: row.wallet_address, to: moved.wallet_address };
    await recordEvents(
      tx,
      project.id,
      [...membershipEvents(record, 'transferred', [{ type: 'membership.transferred', data: { ...record, ...fromTo } }]), transactionEvent(t as TransactionRow)],
      new Date(nowMs),
    );
    return moved;
  });
}

export interface ViewInput {
  walletAddress?: string | undefined;
  membershipType?: string | undefined;
  includeRevoked: boolean;
  includeExpired: boolean;
}

/** `GET /membership/view`: the address filter obeys the address rule and matches case-insensitively. */
export async function viewProjectMemberships(db: Executor, project: ProjectRow, input: ViewInput, nowS: number, page: Page): Promise<MembershipRow[]> {
  let walletLower: string | undefined;
  if (input.walletAddress !== undefined) {
    const address = checksumAddress(input.walletAddress);
    if (address === undefined)
      throw new ValidationError('walletAddress is not a valid address.', [{ in: 'query', path: '/walletAddress', message: ADDRESS_RULE }]);
    walletLower = address.toLowerCase();
  }
  return viewMemberships(
    db,
    project.id,
    { walletLower, membershipType: input.membershipType, includeRevoked: input.includeRevoked, includeExpired: input.includeExpired },
    nowS,
    page,
  );
}

/** The one active membership of (wallet, type) in the project now, if any (the attestations domain's check). */
export async function activeMembership(
  db: Executor,
  projectId: number,
  walletAddress: string,
  membershipType: string,
  nowS: number,
): Promise<MembershipRow | undefined> {
  const filter = { walletLower: walletAddress.toLowerCase(), membershipType, includeRevoked: false, includeExpired: false };
  const [m] = await viewMemberships(db, projectId, filter, nowS, { afterId: 0, limit: 1 });
  return m;
}
