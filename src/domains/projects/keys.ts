import { randomBytes } from 'node:crypto';
import type { AppEnv } from '../../platform/config/config.js';
import { hashSecret, newSecret } from '../../platform/crypto/secrets.js';

export const projectKeyPrefix = (env: AppEnv): string => (env === 'production' ? 'pk_live_' : 'pk_test_');
export const apiTokenPrefix = (env: AppEnv): string => (env === 'production' ? 'sk_live_' : 'sk_test_');

export const newProjectKey = (env: AppEnv): string => newSecret(projectKeyPrefix(env));

/**
 * The hash to look a project key up by, or undefined when it cannot be a key of this
 * environment. No trimming, ever: a key with extra whitespace is invalid (docs/interface.md section 1).
 */
export function projectKeyHash(key: string, env: AppEnv): Buffer | undefined {
  const prefix = projectKeyPrefix(env);
  if (!key.startsWith(prefix) || !/^[A-Za-z0-9_-]{32,128}$/.test(key.slice(prefix.length))) return undefined;
  return hashSecret(key);
}

/** A generated signing secret in the Standard Webhooks form: `whsec_` + base64 of 32 random bytes. */
export const newWebhookSecret = (): string => `whsec_${randomBytes(32).toString('base64')}`;
