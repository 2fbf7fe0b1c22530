import { readFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import NodeVault from 'node-vault';
import { SignerError } from '../errors.js';
import type { SignerLog } from '../log.js';

export type VaultAuth =
  | { kind: 'token'; token: string }
  | { kind: 'approle'; roleId: string; secretId: string; mount: string }
  | { kind: 'kubernetes'; role: string; mount: string; jwtFile: string };

export interface VaultSettings {
  addr: string;
  namespace: string | undefined;
  caCertFile: string | undefined;
  timeoutMs: number;
  /** Attempts for retryable failures (connection errors, 5xx other than sealed). */
  attempts: number;
  auth: VaultAuth;
}

/** Vault answers are JSON objects; the adapter hands them on as such and callers read the fields they need. */
export type VaultBody = Record<string, unknown> & { data?: Record<string, unknown>; auth?: Record<string, unknown> };

interface ApiError {
  response?: { statusCode?: number; body?: { errors?: unknown[] } };
  code?: string;
  message?: string;
}

/** Turns a node-vault/axios failure into a SignerError; the original (which may carry request data) is dropped. */
export function classify(err: unknown): SignerError & { status?: number; vaultStatus?: number } {
  const e = err as ApiError;
  const status = e.response?.statusCode;
  const first = e.response?.body?.errors?.[0];
  const detail = typeof first === 'string' ? first : '';
  let out: SignerError;
  if (status === undefined) out = new SignerError('vault_unavailable', `Vault unreachable (${e.code ?? 'no response'})`);
  else if (status === 503 && /sealed/i.test(detail)) out = new SignerError('vault_sealed', 'Vault is sealed');
  else if (status >= 500 || status === 429) out = new SignerError('vault_unavailable', `Vault answered ${status}`);
  else if (status === 403 || status === 401) out = new SignerError('auth_failed', `Vault refused the request (${status}: ${detail || 'permission denied'})`);
  else if (status === 404) out = new SignerError('not_found', `Vault has nothing at that path (${detail || 404})`);
  else out = new SignerError('invalid_request', `Vault answered ${status}${detail ? `: ${detail}` : ''}`);
  return Object.assign(out, { vaultStatus: status });
}

/**
 * An AppRole login refused for the address it came from: Vault sees a node or NAT address for a
 * Vault outside the cluster, not the pod network, which is the usual cause. Says what to do.
 */
function explainCidr(err: unknown): never {
  if (err instanceof SignerError && /CIDR|source address/i.test(err.message)) {
    throw new SignerError(
      'auth_failed',
      `${err.message}. The AppRole's bound CIDRs (APPROLE_BOUND_CIDRS of scripts/vault-setup.sh) must hold the source address Vault sees for the signer: for a Vault outside the cluster usually a node or NAT address, not the pod network (docs/operations.md, "AppRole and source addresses")`,
    );
  }
  throw err;
}

/**
 * The one place that talks to Vault: node-vault with a request timeout, bounded retries with
 * backoff for retryable failures, and token renewal (or a fresh login for AppRole and
 * Kubernetes auth) before the token expires.
 */
export class VaultAdapter {
  readonly #client: NodeVault.client;
  readonly #ca: string | undefined;
  #renewal: NodeJS.Timeout | undefined;
  #loggingIn: Promise<void> | undefined;

  constructor(
    private readonly settings: VaultSettings,
    private readonly log: SignerLog,
  ) {
    const ca = settings.caCertFile ? readFileSync(settings.caCertFile, 'utf8') : undefined;
    this.#ca = ca;
    this.#client = NodeVault({
      apiVersion: 'v1',
      endpoint: settings.addr,
      ...(settings.namespace ? { namespace: settings.namespace } : {}),
      ...(settings.auth.kind === 'token' ? { token: settings.auth.token } : {}),
      requestOptions: { timeout: settings.timeoutMs, ...(ca ? { ca } : {}) },
    });
  }

  /** Logs in (AppRole, Kubernetes) or checks the token, and schedules renewal. */
  async login(): Promise<void> {
    this.#loggingIn ??= this.#login().finally(() => (this.#loggingIn = undefined));
    return this.#loggingIn;
  }

  /**
   * When the AppRole secret id the signer logs in with expires (ISO time); null: never; undefined:
   * not known (the policy lacks the secret-id lookup that scripts/vault-setup.sh grants).
   */
  credentialExpiresAt: string | null | undefined;

  /** Reads the expiry of our AppRole secret id, so that an alert can fire days before it lapses. */
  async #lookUpSecretId(mount: string, secretId: string): Promise<void> {
    try {
      const self = (await this.#raw(() => this.#client.tokenLookupSelf())) as VaultBody;
      const role = (self.data?.['meta'] as Record<string, unknown> | undefined)?.['role_name'];
      if (typeof role !== 'string') throw new Error('no role_name in the token');
      const found = (await this.#raw(() => this.#client.write(`auth/${mount}/role/${role}/secret-id/lookup`, { secret_id: secretId }))) as VaultBody;
      const expiration = found.data?.['expiration_time'];
      const at = typeof expiration === 'string' ? expiration : '';
      const time = Date.parse(at);
      this.credentialExpiresAt = Number.isNaN(time) || time <= 0 ? null : new Date(time).toISOString();
      const days = this.credentialExpiresAt === null ? Infinity : (time - Date.now()) / 86_400_000;
      if (days < 7)
        this.log.warn(
          { expiresAt: this.credentialExpiresAt },
          `the AppRole secret id expires in ${days.toFixed(1)} days: rotate it (scripts/vault-setup.sh --print-approle)`,
        );
    } catch (err) {
      this.credentialExpiresAt = undefined;
      this.log.warn({ code: classify(err).code }, 'cannot read the AppRole secret id expiry (re-run scripts/vault-setup.sh to grant the lookup)');
    }
  }

  async #login(): Promise<void> {
    const auth = this.settings.auth;
    let ttl: number;
    let renewable: boolean;
    if (auth.kind === 'token') {
      const self = (await this.#raw(() => this.#client.tokenLookupSelf())) as VaultBody;
      ttl = Number(self.data?.['ttl'] ?? 0);
      renewable = self.data?.['renewable'] === true;
    } else {
      const body =
        auth.kind === 'approle'
          ? await this.#raw(() => this.#client.write(`auth/${auth.mount}/login`, { role_id: auth.roleId, secret_id: auth.secretId })).catch(explainCidr)
          : await this.#raw(() => this.#client.write(`auth/${auth.mount}/login`, { role: auth.role, jwt: readFileSync(auth.jwtFile, 'utf8').trim() }));
      const token = (body as VaultBody).auth?.['client_token'];
      if (typeof token !== 'string') throw new SignerError('auth_failed', 'Vault login returned no token');
      this.#client.token = token;
      ttl = Number((body as VaultBody).auth?.['lease_duration'] ?? 0);
      renewable = (body as VaultBody).auth?.['renewable'] === true;
      if (auth.kind === 'approle') await this.#lookUpSecretId(auth.mount, auth.secretId);
    }
    this.#schedule(ttl, renewable);
  }

  /** At two thirds of the TTL: renew a renewable token, else log in again (when we can). */
  #schedule(ttlS: number, renewable: boolean): void {
    clearTimeout(this.#renewal);
    if (ttlS <= 0) return; // a root or non-expiring token
    this.#renewal = setTimeout(
      () => {
        const next = renewable
          ? this.#raw(() => this.#client.tokenRenewSelf()).then((b) => {
              const auth = (b as VaultBody).auth;
              this.#schedule(Number(auth?.['lease_duration'] ?? 0), auth?.['renewable'] === true);
            })
          : this.settings.auth.kind === 'token'
            ? Promise.resolve()
            : this.login();
        next.catch((err: unknown) => {
          this.log.warn({ code: classify(err).code }, 'vault token renewal failed; logging in again');
          if (this.settings.auth.kind !== 'token') this.login().catch(() => undefined);
        });
      },
      Math.max(1_000, (ttlS * 1000 * 2) / 3),
    );
    this.#renewal.unref();
  }

  async #raw(call: () => Promise<unknown>): Promise<unknown> {
    try {
      return await call();
    } catch (err) {
      throw classify(err);
    }
  }

  /** A call with retries for retryable failures and one fresh login on a 403 with login-based auth. */
  async #call<T = VaultBody>(call: () => Promise<unknown>): Promise<T> {
    let relogged = false;
    for (let attempt = 1; ; attempt++) {
      try {
        return (await this.#raw(call)) as T;
      } catch (err) {
        const e = err as SignerError;
        if (e.code === 'auth_failed' && !relogged && this.settings.auth.kind !== 'token') {
          relogged = true;
          await this.login();
          continue;
        }
        if (e.code !== 'vault_unavailable' || attempt >= this.settings.attempts) throw e;
        await new Promise((r) => setTimeout(r, 50 * 4 ** (attempt - 1)));
      }
    }
  }

  read(path: string): Promise<VaultBody> {
    return this.#call(() => this.#client.read(path));
  }

  /** LIST: the names under a folder path (with a trailing `/`); none when Vault has nothing there. */
  async list(path: string): Promise<string[]> {
    try {
      const body = await this.#call(() => this.#client.list(path));
      const keys = body.data?.['keys'];
      return Array.isArray(keys) ? keys.filter((k): k is string => typeof k === 'string') : [];
    } catch (err) {
      if ((err as SignerError).code === 'not_found') return [];
      throw err;
    }
  }

  write(path: string, data: Record<string, unknown>): Promise<VaultBody> {
    return this.#call(() => this.#client.write(path, data));
  }

  /**
   * A POST whose body and answer stay bytes (transit encrypt and decrypt: transit-bytes.ts), with
   * the same retries and re-login as every other call. The caller owns and zeroes both buffers.
   */
  postBytes(path: string, body: Buffer): Promise<Buffer> {
    return this.#call<Buffer>(() => this.#postBytesOnce(path, body));
  }

  #postBytesOnce(path: string, body: Buffer): Promise<Buffer> {
    const url = new URL(`/v1/${path}`, this.settings.addr);
    const headers: Record<string, string | number> = { 'content-type': 'application/json', 'content-length': body.length };
    const token = this.#client.token;
    if (token) headers['x-vault-token'] = token;
    if (this.settings.namespace) headers['x-vault-namespace'] = this.settings.namespace;
    const send = url.protocol === 'https:' ? httpsRequest : httpRequest;
    return new Promise<Buffer>((resolve, reject) => {
      const req = send(url, { method: 'POST', headers, timeout: this.settings.timeoutMs, ...(this.#ca ? { ca: this.#ca } : {}) }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', reject);
        res.on('end', () => {
          const answer = Buffer.concat(chunks);
          for (const c of chunks) c.fill(0);
          const status = res.statusCode ?? 0;
          if (status >= 200 && status < 300) return resolve(answer);
          // An error answer holds no plaintext; its `errors` are what classify() reads.
          let errors: unknown[] = [];
          try {
            const parsed = JSON.parse(answer.toString('utf8')) as { errors?: unknown };
            if (Array.isArray(parsed.errors)) errors = parsed.errors;
          } catch {
            // not JSON: the status alone classifies it
          }
          answer.fill(0);
          reject(Object.assign(new Error(`Vault answered ${status}`), { response: { statusCode: status, body: { errors } } }));
        });
      });
      req.on('timeout', () => req.destroy(Object.assign(new Error('Vault request timed out'), { code: 'ETIMEDOUT' })));
      req.on('error', reject);
      req.end(body);
    });
  }

  /** sys/health: 200 active, 429 standby, 501 uninitialised, 503 sealed (node-vault returns the body for all). */
  async health(): Promise<{ initialized: boolean; sealed: boolean; standby: boolean }> {
    const body = (await this.#raw(() => this.#client.health({ standbyok: true }))) as Record<string, unknown>;
    return { initialized: body['initialized'] === true, sealed: body['sealed'] === true, standby: body['standby'] === true };
  }

  close(): void {
    clearTimeout(this.#renewal);
  }
}
