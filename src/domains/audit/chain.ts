import { createHash } from 'node:crypto';
import { compactVerify, createLocalJWKSet, type JSONWebKeySet } from 'jose';
import { SERVICE_PURPOSES } from '../../../contract/index.js';

/** The hash before the first row. */
export const GENESIS = Buffer.alloc(32);

/** An audit row as the chain hashes it: every column of audit_log but `xid` (how the sealer finds it), `at` to the microsecond in UTC. */
export interface ChainEntry {
  seq: number;
  id: number;
  at: string;
  organisationId: number | null;
  projectId: number | null;
  actor: string;
  action: string;
  target: string | null;
  status: number | null;
  requestId: string | null;
  details: unknown;
}

/** A sealed row: the entry with its chain fields (hex). */
export interface SealedEntry extends ChainEntry {
  prevHash: string;
  hash: string;
}

/** A checkpoint as stored and exported. */
export interface Checkpoint {
  size: number;
  head: string;
  time: string;
  jws: string;
}

/** JSON with object keys sorted at every depth: one text per value, whatever order it was built or stored in. */
export function canonical(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'null';
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  const o = value as Record<string, unknown>;
  return `{${Object.keys(o)
    .filter((k) => o[k] !== undefined)
    .sort()
    .map((k) => `${JSON.stringify(k)}:${canonical(o[k])}`)
    .join(',')}}`;
}

/** The bytes of a row the chain hashes: its fields in canonical JSON. */
export const canonicalRow = (e: ChainEntry): string =>
  canonical({
    seq: e.seq,
    id: e.id,
    at: e.at,
    organisationId: e.organisationId,
    projectId: e.projectId,
    actor: e.actor,
    action: e.action,
    target: e.target,
    status: e.status,
    requestId: e.requestId,
    details: e.details,
  });

/** SHA-256(previous hash ‖ canonical row). */
export const rowHash = (prev: Buffer, e: ChainEntry): Buffer => createHash('sha256').update(prev).update(canonicalRow(e), 'utf8').digest();

/** Where a verification found the chain not to match, and what it found there. */
export interface ChainProblem {
  /** The first sequence number that does not match (a missing row's own number). */
  seq: number;
  kind: 'changed' | 'missing' | 'broken_link' | 'out_of_order' | 'truncated' | 'checkpoint_mismatch' | 'checkpoint_signature' | 'unchained';
  message: string;
}

export interface VerifyReport {
  ok: boolean;
  rows: number;
  checkpoints: number;
  lastSeq: number;
  problem?: ChainProblem;
}

/**
 * Recomputes a chain fed row by row in sequence order and checks its checkpoints (signatures
 * against a JWKS, heads against the recomputed rows), stopping at the first problem.
 * `contiguous`: the whole chain from `after + 1` (the database, an operator's export); otherwise
 * the rows of one organisation (each row's own hash, links where rows are adjacent).
 */
export class ChainVerifier {
  #prev: Buffer | undefined;
  #lastSeq: number;
  #rows = 0;
  #problem: ChainProblem | undefined;
  /** Checkpoint heads by size, once their signatures are checked. */
  readonly #heads = new Map<number, string>();
  #matchedCheckpoints = 0;

  constructor(
    private readonly contiguous: boolean,
    after = 0,
  ) {
    this.#lastSeq = after;
    if (after === 0) this.#prev = GENESIS;
  }

  get problem(): ChainProblem | undefined {
    return this.#problem;
  }

  #fail(problem: ChainProblem): false {
    this.#problem ??= problem;
    return false;
  }

  /** Checks each checkpoint's signature before the rows come (a bad one is the problem at its size). */
  async checkpoints(list: readonly Checkpoint[], jwks: JSONWebKeySet): Promise<boolean> {
    const keys = createLocalJWKSet(jwks);
    for (const c of [...list].sort((a, b) => a.size - b.size)) {
      try {
        const { payload, protectedHeader } = await compactVerify(c.jws, keys, { algorithms: ['ES256'] });
        const claims = JSON.parse(Buffer.from(payload).toString('utf8')) as Record<string, unknown>;
        if (protectedHeader.typ !== SERVICE_PURPOSES['audit-checkpoint']) throw new Error(`typ is ${String(protectedHeader.typ)}`);
        if (claims['size'] !== c.size || claims['head'] !== c.head || claims['time'] !== c.time)
          throw new Error('the signed payload differs from the stored checkpoint');
      } catch (err) {
        return this.#fail({
          seq: c.size,
          kind: 'checkpoint_signature',
          message: `the checkpoint of size ${c.size} does not verify against the JWKS: ${(err as Error).message}`,
        });
      }
      this.#heads.set(c.size, c.head);
    }
    return true;
  }

  /** Whether `seq` may come next: not before the last row, and in a contiguous chain right after it. */
  #next(seq: number): boolean {
    if (this.#problem) return false;
    const expected = this.#lastSeq + 1;
    if (seq < expected) return this.#fail({ seq, kind: 'out_of_order', message: `row ${seq} comes after row ${this.#lastSeq}` });
    if (this.contiguous && seq > expected)
      return this.#fail({ seq: expected, kind: 'missing', message: `row ${expected} is missing (the next row is ${seq})` });
    return true;
  }

  /** A chain entry whose audit row is gone (the database's chain): the row is missing at its number. */
  gone(seq: number, auditId: number): false {
    if (!this.#next(seq)) return false;
    return this.#fail({ seq, kind: 'missing', message: `row ${seq} is missing: its chain entry names audit row ${auditId}, which is gone` });
  }

  /** A chain entry filed under another organisation than its row's (the chain's copy, which finds an organisation's export). */
  misfiled(seq: number, auditId: number): false {
    return this.#fail({
      seq,
      kind: 'changed',
      message: `row ${seq} (id ${auditId}) is filed under another organisation in the chain than its row names: the chain was changed after it was sealed`,
    });
  }

  /** An audit row the sealer has passed that has no place in the chain (after the last row was pushed). */
  unchained(auditId: number): false {
    return this.#fail({
      seq: this.#lastSeq + 1,
      kind: 'unchained',
      message: `audit row ${auditId} has no place in the chain although the sealer has passed it: its chain entry was deleted, or it was written behind the sealer`,
    });
  }

  /** One row, in sequence order; false once a problem is found. */
  push(row: SealedEntry): boolean {
    if (!this.#next(row.seq)) return false;
    const expected = this.#lastSeq + 1;
    const stored = Buffer.from(row.prevHash, 'hex');
    const adjacent = row.seq === expected && this.#prev !== undefined;
    if (adjacent && !stored.equals(this.#prev as Buffer))
      return this.#fail({ seq: row.seq, kind: 'broken_link', message: `row ${row.seq} does not follow row ${row.seq - 1}: its previous hash differs` });
    if (rowHash(stored, row).toString('hex') !== row.hash)
      return this.#fail({
        seq: row.seq,
        kind: 'changed',
        message: `row ${row.seq} (id ${row.id}) does not match its hash: it was changed after it was sealed`,
      });
    const head = this.#heads.get(row.seq);
    if (head !== undefined) {
      if (head !== row.hash)
        return this.#fail({
          seq: row.seq,
          kind: 'checkpoint_mismatch',
          message: `the signed checkpoint of size ${row.seq} names another head: a row up to ${row.seq}${this.#previousCheckpoint(row.seq)} was changed and the chain after it recomputed`,
        });
      this.#matchedCheckpoints++;
    }
    this.#prev = Buffer.from(row.hash, 'hex');
    this.#lastSeq = row.seq;
    this.#rows++;
    return true;
  }

  #previousCheckpoint(size: number): string {
    const below = [...this.#heads.keys()].filter((s) => s < size);
    return below.length > 0 ? ` (after the checkpoint of size ${Math.max(...below)})` : '';
  }

  /** The report once every row was pushed: a checkpoint past the last row means rows were cut off the tail. */
  finish(): VerifyReport {
    if (!this.#problem && this.contiguous) {
      const beyond = [...this.#heads.keys()].filter((s) => s > this.#lastSeq);
      if (beyond.length > 0) {
        const size = Math.max(...beyond);
        this.#fail({
          seq: this.#lastSeq + 1,
          kind: 'truncated',
          message: `the chain ends at row ${this.#lastSeq} but a signed checkpoint covers ${size} rows: rows ${this.#lastSeq + 1} to ${size} are missing`,
        });
      }
    }
    return {
      ok: this.#problem === undefined,
      rows: this.#rows,
      checkpoints: this.contiguous ? this.#heads.size : this.#matchedCheckpoints,
      lastSeq: this.#lastSeq,
      ...(this.#problem ? { problem: this.#problem } : {}),
    };
  }
}
