import { SignerError } from './errors.js';
import { evaluate, type Decision } from './policy/evaluate.js';
import type { Caller } from './policy/document.js';
import type { PolicyStore } from './policy/store.js';
import { hex } from './sign/input.js';
import { signOperation, type Operation } from './sign/operation.js';
import type { Transaction } from './sign/transaction.js';
import { boundProject, recordedProject } from './key-project.js';
import { NonceGuard } from './sign/nonce-guard.js';
import type { KeyRecord, KeyStore } from './stores/types.js';

/** Key records a signer keeps (~0.5 KB each). */
const RECORDS = 10_000;

export interface SignRequest {
  keyId: string;
  projectId: string;
  caller: Caller;
  /** Read and hashed already (keyvault/read-pool.ts): nothing here reads the caller's JSON. */
  operation: Operation;
}

export interface Signed {
  digest: string;
  policyVersion: number;
  rule: string;
  answer: Record<string, unknown>;
}

/** A refusal by policy: what the API records and answers (the rule, or null for "no rule allows this"). */
export class PolicyDenied extends SignerError {
  constructor(
    readonly decision: Decision,
    readonly policyVersion: number,
    readonly digest: string,
  ) {
    super('policy_denied', decision.rule ? `denied by the rule "${decision.rule}"` : 'no rule allows this');
  }
}

/**
 * Signing (docs/signing.md), in the order its rules give: read the operation and compute its digest;
 * the key must belong to the project named (stored with it, or bound once by a carry-over); the project's newest policy
 * decides; only an allowed operation leads to a decrypt; the key is in clear for the one
 * signature and zeroed after it.
 */
export class Signer {
  /** Projects of keys of earlier releases, once bound: write-once, so never read twice. */
  readonly #bound = new Map<string, string>();
  /**
   * Key records (address, ciphertext, project) are write-once too: kept, up to RECORDS, so that a
   * signature costs Vault one transit decrypt and no KV read. Never a key in clear.
   */
  readonly #records = new Map<string, KeyRecord>();
  readonly #nonces: NonceGuard;

  constructor(
    private readonly store: KeyStore,
    private readonly policies: PolicyStore,
  ) {
    this.#nonces = new NonceGuard(store);
  }

  /**
   * The key must sign for the project named (keyvault/key-project.ts): stored with it at creation,
   * or bound by a carry-over for a key of an earlier release. Nothing is bound here: the first
   * project to ask is no evidence of whose key it is.
   */
  async #checkProject(record: KeyRecord, projectId: string): Promise<void> {
    let bound = recordedProject(record) ?? this.#bound.get(record.keyId);
    if (bound === undefined) {
      bound = await boundProject(this.store, record);
      // An unbound key is asked again next time: a carry-over may bind it meanwhile.
      if (bound !== undefined) this.#bound.set(record.keyId, bound);
    }
    if (bound === undefined)
      throw new SignerError('key_unbound', 'the key signs for no project: an earlier release made it without one and no carry-over has bound it');
    if (bound !== projectId) throw new SignerError('wrong_project', 'the key belongs to another project');
  }

  async #record(keyId: string): Promise<KeyRecord> {
    const known = this.#records.get(keyId);
    if (known) return known;
    const record = await this.store.get(keyId);
    if (!record) throw new SignerError('not_found', 'no such key');
    // Oldest first out: a Map iterates in insertion order.
    if (this.#records.size >= RECORDS) this.#records.delete(this.#records.keys().next().value ?? '');
    this.#records.set(keyId, record);
    return record;
  }

  /**
   * A kept record may be older than the store's: a rewrap (keyvault/rewrap.ts) writes the same key
   * under a newer transit version, and once the old version is retired transit refuses the kept
   * ciphertext. Then the record is read again, and decrypted once more if it changed.
   */
  async #decrypt(record: KeyRecord): Promise<Uint8Array> {
    try {
      return await this.store.decrypt(record.context, record.ciphertext);
    } catch (err) {
      if ((err as SignerError).code !== 'invalid_request') throw err;
      this.#records.delete(record.keyId);
      const fresh = await this.#record(record.keyId);
      if (fresh.ciphertext === record.ciphertext || fresh.address !== record.address) throw err;
      return this.store.decrypt(fresh.context, fresh.ciphertext);
    }
  }

  /** The decision for an operation, with the policy version that made it; no key is read. */
  async decide(projectId: string, op: Operation, caller: Caller): Promise<{ decision: Decision; policyVersion: number }> {
    const policy = await this.policies.latest(projectId);
    return { decision: evaluate(policy?.value, op, caller), policyVersion: policy?.version ?? 0 };
  }

  async sign(req: SignRequest): Promise<Signed> {
    const op = req.operation;
    const record = await this.#record(req.keyId);
    await this.#checkProject(record, req.projectId);
    if (op.from !== undefined && op.from !== record.address) throw new SignerError('invalid_operation', '/params/transaction/from is not the signing wallet');
    const purpose = op.transaction?.intent.purpose;
    if ((purpose === 'cancel' || purpose === 'gapFill') && !isNoOp(op.transaction?.tx, record.address))
      throw new SignerError('invalid_operation', `/params/transaction a ${purpose} must be a transfer of nothing to the signing wallet itself, without data`);
    const { decision, policyVersion } = await this.decide(req.projectId, op, req.caller);
    if (!decision.allowed || decision.rule === null) throw new PolicyDenied(decision, policyVersion, hex(op.digest));
    const secret = await this.#decrypt(record);
    let signed: ReturnType<typeof signOperation>;
    try {
      signed = signOperation(op, secret);
    } finally {
      secret.fill(0);
    }
    const answer = await signed.answer;
    // Written before the signature leaves: a second transaction at this nonce needs `replaces`.
    if (op.transaction) await this.#nonces.admit(req.keyId, op.transaction.tx, op.transaction.intent, { digest: signed.digest, hash: String(answer['hash']) });
    return { digest: signed.digest, policyVersion, rule: decision.rule, answer };
  }
}

/** A transfer of nothing to the sender itself, without data: what a cancel or a gap fill is. */
const isNoOp = (tx: Transaction | undefined, self: string): boolean =>
  tx !== undefined && tx.to?.toLowerCase() === self.toLowerCase() && tx.value === 0n && tx.data.length === 0;
