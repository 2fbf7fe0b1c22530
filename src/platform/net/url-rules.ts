import type { AppEnv } from '../config/config.js';

export const MAX_URL_LENGTH = 2048;

function parse(value: string): URL | undefined {
  if (value.length > MAX_URL_LENGTH || value.trim() !== value) return undefined;
  try {
    return new URL(value);
  } catch {
    return undefined;
  }
}

/**
 * An OIDC issuer: an absolute `https` URL without credentials, query or fragment (OpenID
 * Connect Discovery 1.0, section 3). It is compared with `iss` exactly, so it is kept as given.
 */
export function issuerProblem(value: string): string | undefined {
  const url = parse(value);
  if (!url) return `must be an absolute URL of at most ${MAX_URL_LENGTH} characters`;
  if (url.protocol !== 'https:') return 'must be an https URL';
  if (url.username !== '' || url.password !== '') return 'must not contain credentials';
  if (url.search !== '' || url.hash !== '' || value.includes('?') || value.includes('#')) return 'must not have a query or fragment';
  return undefined;
}

/** A webhook target: `https` in production, `http` also allowed in testnet (docs/interface.md section 8). */
export function webhookUrlProblem(value: string, env: AppEnv): string | undefined {
  const url = parse(value);
  if (!url) return `must be an absolute URL of at most ${MAX_URL_LENGTH} characters`;
  const allowed = env === 'production' ? ['https:'] : ['https:', 'http:'];
  if (!allowed.includes(url.protocol)) return env === 'production' ? 'must be an https URL in production' : 'must be an http or https URL';
  if (url.username !== '' || url.password !== '') return 'must not contain credentials';
  if (url.hash !== '') return 'must not have a fragment';
  return undefined;
}

/**
 * A webhook signing secret (docs/interface.md section 8): 16-256 printable ASCII characters; a
 * `whsec_` secret must be base64 of 24-64 bytes after the prefix.
 */
export function webhookSecretProblem(value: string): string | undefined {
  if (!/^[\x21-\x7e]{16,256}$/.test(value)) return 'must be 16 to 256 printable ASCII characters without spaces';
  if (value.startsWith('whsec_')) {
    const b64 = value.slice('whsec_'.length);
    const bytes = Buffer.from(b64, 'base64');
    if (!/^[A-Za-z0-9+/]+={0,2}$/.test(b64) || bytes.length < 24 || bytes.length > 64 || bytes.toString('base64') !== b64) {
      return 'a whsec_ secret must be base64 of 24 to 64 bytes after the prefix';
    }
  }
  return undefined;
}
