import { SEALED_DEV_IDP_KEY } from '../access/auth/dev-idp.js';
import { DOMAINS } from '../domains/index.js';
import type { SealedColumn } from '../platform/crypto/reseal.js';
import { SEALED_ANSWERS } from '../platform/idempotency/repository.js';

/**
 * Every column holding values sealed under the data encryption key: the domains' (their manifests)
 * and the platform's. `custody data-key` walks these; test/data-key-rotation.test.ts fails on a
 * sealed value found in any other column.
 */
export const SEALED_COLUMNS: readonly SealedColumn[] = [...DOMAINS.flatMap((d) => d.sealed ?? []), SEALED_ANSWERS, SEALED_DEV_IDP_KEY];
