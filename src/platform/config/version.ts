import { readFileSync } from 'node:fs';

/** The package version (dist/src/version.js → ../../package.json); 0.0.0 when it cannot be read. */
export function serviceVersion(): string {
  try {
    const pkg = JSON.parse(readFileSync(new URL('../../../../package.json', import.meta.url), 'utf8')) as { version?: unknown };
    return typeof pkg.version === 'string' ? pkg.version : '0.0.0';
  } catch {
    return '0.0.0';
  }
}
