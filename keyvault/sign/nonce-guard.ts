import { SignerError } from '../errors.js';
import type { KeyStore } from '../stores/types.js';
import { nonceGuardPath } from '../stores/documents.js';
import type { Transaction, TransactionIntent } from './transaction.js';

/** What was signed at one nonce: the signing digest and the transaction's hash, oldest first. */
interface Signed {
  digest: string;
  hash: string;
}

/** Nonces this signer remembers (~200 bytes each); older ones are read again from the store. */
const REMEMBERED = 50_000;

/** A refusal naming what was signed at the nonce, so the API can say which transaction holds it. */
export class NonceConflict extends SignerError {
  constructor(
    readonly chainId: bigint,
    readonly nonce: bigint,
    readonly signed: string[],
  ) {
    super('nonce_conflict', `the key has signed another transaction at nonce ${nonce} on chain ${chainId}; name it in "replaces" to replace it`);
  }
}

/**
 * One transaction per key, chain and nonce (docs/transactions.md): the signer writes what it signed
 * at a nonce (write-once documents `tx-nonces/<key>/<chain>/<nonce>/v<n>`) before the signature
 * leaves, and signs a different transaction there only when the request names one already signed
 * at that nonce as the one it replaces. The same transaction again is always signed (a retry after
 * a lost answer). The API cannot talk its way around this: it holds no document of the store.
 */
export class NonceGuard {
  readonly #known = new Map<string, Signed[]>();

  constructor(private readonly store: KeyStore) {}

  async admit(keyId: string, tx: Transaction, intent: TransactionIntent, signed: Signed): Promise<void> {
    const at = `${keyId}/${tx.chainId}/${tx.nonce}`;
    let list = this.#known.get(at);
    for (let round = 0; round < 4; round++) {
      if (list?.some((s) => s.digest === signed.digest)) return;
      const replaces = intent.replaces;
      if (list !== undefined && list.length > 0 && (replaces === undefined || !list.some((s) => s.hash === replaces))) {
        // What is remembered may be behind another replica's writes: read before refusing.
        if (round === 0) {
          list = await this.#read(keyId, tx);
          continue;
        }
        throw new NonceConflict(
          tx.chainId,
          tx.nonce,
          list.map((s) => s.hash),
        );
      }
      const version = (list?.length ?? 0) + 1;
      const body = { ...signed, ...(replaces && version > 1 ? { replaces } : {}), ...(intent.purpose ? { purpose: intent.purpose } : {}) };
      const written = await this.store.putDocumentOnce({
        path: nonceGuardPath(keyId, tx.chainId, tx.nonce, version),
        body,
        createdAt: new Date().toISOString(),
      });
      if (written === 'created') {
        this.#remember(at, [...(list ?? []), signed]);
        return;
      }
      // Another request wrote this version first: read what is there and decide again.
      list = await this.#read(keyId, tx);
    }
    throw new SignerError('vault_unavailable', 'the nonce record kept changing while it was written; retry');
  }

  async #read(keyId: string, tx: Transaction): Promise<Signed[]> {
    const list: Signed[] = [];
    for (let v = 1; ; v++) {
      const doc = await this.store.getDocument(nonceGuardPath(keyId, tx.chainId, tx.nonce, v));
      if (!doc) break;
      const { digest, hash } = doc.body;
      if (typeof digest !== 'string' || typeof hash !== 'string') throw new SignerError('internal', `the nonce record at ${doc.path} is not readable`);
      list.push({ digest, hash });
    }
    this.#remember(`${keyId}/${tx.chainId}/${tx.nonce}`, list);
    return list;
  }

  #remember(at: string, list: Signed[]): void {
    this.#known.delete(at);
    if (this.#known.size >= REMEMBERED) this.#known.delete(this.#known.keys().next().value ?? '');
    this.#known.set(at, list);
  }
}
