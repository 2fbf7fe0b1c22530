import type { Knex } from 'knex';
import type { DevIdp } from '../access/auth/dev-idp.js';
import type { OidcVerifier } from '../access/auth/oidc.js';
import type { Clock } from '../platform/runtime/clock.js';
import type { AppEnv, Config } from '../platform/config/config.js';
import type { SecretBox } from '../platform/crypto/secrets.js';
import type { SealedColumn } from '../platform/crypto/reseal.js';
import type { EventDefinition } from './webhooks/catalogue.js';
import type { Declaration } from '../access/endpoints/declare.js';
import type { RouteDeps } from '../access/endpoints/route-deps.js';
import type { Logger } from '../platform/logging/logger.js';
import type { Feeder, JobKind } from '../platform/outbox/registry.js';
import type { PeriodicTask } from '../platform/runtime/scheduler.js';
import type { SignerClient } from '../platform/signer/client.js';

/** What a domain's endpoints may use: the shared middlewares and the process's services. */
export interface EndpointDeps extends RouteDeps {
  db: Knex;
  log: Logger;
  signer: SignerClient;
  /** For the issuer diagnostic; users are authenticated by the declaration (access/auth/user.ts). */
  oidc: OidcVerifier;
  env: AppEnv;
  /** The development identity provider, in testnet deployments with DEV_IDP. */
  devIdp?: DevIdp;
}

/** What a domain's background work may use (the relay's jobs, periodic tasks). */
export interface WorkDeps {
  config: Config;
  db: Knex;
  signer: SignerClient;
  log: Logger;
  now: Clock;
  secretBox: SecretBox;
}

/**
 * A domain's manifest, exported from its folder's index.ts: everything the assembly needs of it.
 * The assembly (src/programs/assembly.ts) iterates the one list of domains (domains/index.ts) for each part.
 */
export interface Domain {
  readonly name: string;
  /** The event types it records, in the order the catalogue lists them. */
  readonly events?: readonly EventDefinition[];
  /** Its endpoints, in the order they are mounted (a literal path before a parameter in the same place). */
  endpoints?(deps: EndpointDeps): readonly Declaration[];
  /** Its kinds of outbox work and the feeders of recorded rows. */
  jobs?(deps: WorkDeps): { readonly kinds?: readonly JobKind[]; readonly feeders?: readonly Feeder[] };
  /** Its periodic work; each task says which role runs it. */
  periodic?(deps: WorkDeps): readonly PeriodicTask[];
  /** Waits, at most `timeoutMs`, for work its requests started that goes on after their answers (at shutdown, once requests are over). */
  drain?(deps: WorkDeps, timeoutMs: number): Promise<void>;
  /** The columns of its tables that hold values sealed under the data encryption key (re-encrypted on a rotation). */
  readonly sealed?: readonly SealedColumn[];
}

/** Checks a manifest's shape where it is written. */
export const defineDomain = <const D extends Domain>(domain: D): D => domain;
