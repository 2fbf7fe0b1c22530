import { randomUUID } from 'node:crypto';
import { exportJWK, exportPKCS8, generateKeyPair, importPKCS8, SignJWT, type JSONWebKeySet, type JWK } from 'jose';
import type { Executor, Knex } from '../../platform/db/knex.js';
import type { SecretBox } from '../../platform/crypto/secrets.js';
import type { SealedColumn } from '../../platform/crypto/reseal.js';

/**
 * The issuer of the development identity provider. `.invalid` never resolves (RFC 6761), so no
 * real provider can be this issuer, and a project that trusts it trusts only this deployment's key.
 */
export const DEV_ISSUER = 'https://dev-idp.invalid';

const AAD = 'custody:dev-idp-key:v1';

/** The development identity provider's private key, sealed: re-encrypted on a data-key rotation. */
export const SEALED_DEV_IDP_KEY: SealedColumn = { table: 'dev_idp_key', column: 'private_key_sealed', key: ['id'], aad: () => AAD };

interface KeyRow {
  kid: string;
  public_jwk: JWK;
  private_key_sealed: string;
}

/**
 * A development identity provider (testnet only, config DEV_IDP): it signs ID tokens for any
 * e-mail it is asked for, for projects whose issuer is DEV_ISSUER, so a service can be tried by
 * hand without an identity provider. Its key is one database row (the first process to start
 * makes it), sealed under the data encryption key; verification reads its key set from here,
 * never from the network.
 */
export class DevIdp {
  #key: Promise<KeyRow> | undefined;
  #signing: { kid: string; key: ReturnType<typeof importPKCS8> } | undefined;

  constructor(
    private readonly db: Knex,
    private readonly secretBox: SecretBox,
  ) {}

  /**
   * The key, made once per deployment; concurrent first starts agree on one row. `db`: where a
   * request that asks runs (its transaction holds its only connection), else the pool.
   */
  key(db: Executor = this.db): Promise<KeyRow> {
    if (this.#key) return this.#key;
    const loading = this.#load(db);
    // Kept only when read on the pool: a request's transaction could still roll its insert back.
    if (db !== this.db) return loading;
    this.#key = loading;
    // A failure is the caller's to see; the next call tries again.
    loading.catch(() => {
      if (this.#key === loading) this.#key = undefined;
    });
    return loading;
  }

  async #row(db: Executor): Promise<KeyRow | undefined> {
    const rows: KeyRow[] = await db<KeyRow & { id: number }>('dev_idp_key').where('id', 1).select('kid', 'public_jwk', 'private_key_sealed');
    return rows[0];
  }

  async #load(db: Executor): Promise<KeyRow> {
    const existing = await this.#row(db);
    if (existing) return existing;
    const { publicKey, privateKey } = await generateKeyPair('RS256', { extractable: true });
    const kid = `dev-${randomUUID()}`;
    const row: KeyRow = {
      kid,
      public_jwk: { ...(await exportJWK(publicKey)), kid, alg: 'RS256', use: 'sig' },
      private_key_sealed: this.secretBox.seal(await exportPKCS8(privateKey), AAD),
    };
    await db('dev_idp_key')
      .insert({ id: 1, kid: row.kid, public_jwk: JSON.stringify(row.public_jwk), private_key_sealed: row.private_key_sealed })
      .onConflict('id')
      .ignore();
    const stored = await this.#row(db);
    if (!stored) throw new Error('the development identity provider key could not be stored');
    return stored;
  }

  async keySet(): Promise<JSONWebKeySet> {
    return { keys: [(await this.key()).public_jwk] };
  }

  /** An ID token for `email`, as a provider would sign it for the service's audience. */
  async mint(
    db: Executor,
    input: {
      email: string;
      emailVerified: boolean;
      audience: string;
      ttlS: number;
      now: number;
      extraClaims?: Record<string, string>;
    },
  ): Promise<string> {
    const row = await this.key(db);
    // Opened and imported once per key, not per token.
    if (this.#signing?.kid !== row.kid) this.#signing = { kid: row.kid, key: importPKCS8(this.secretBox.open(row.private_key_sealed, AAD), 'RS256') };
    const privateKey = await this.#signing.key;
    const nowS = Math.floor(input.now / 1000);
    return new SignJWT({ ...input.extraClaims, email: input.email, email_verified: input.emailVerified })
      .setProtectedHeader({ alg: 'RS256', kid: row.kid, typ: 'JWT' })
      .setIssuer(DEV_ISSUER)
      .setAudience(input.audience)
      .setSubject(`dev|${input.email}`)
      .setIssuedAt(nowS)
      .setExpirationTime(nowS + input.ttlS)
      .sign(privateKey);
  }
}
