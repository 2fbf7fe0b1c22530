import { mkdirSync, writeFileSync } from 'node:fs';
import { startApp } from './app.js';
import { Conformance } from './conformance.js';
import { observed } from './observed.js';

/** The document the service serves, fetched from a real app. */
export async function servedDocument(): Promise<unknown> {
  const app = await startApp();
  try {
    const res = await fetch(`${app.url}/openapi.json`);
    return await res.json();
  } finally {
    await app.close();
  }
}

/**
 * Run at the end of every test run (root hook): each response the suites' HTTP client saw is
 * checked against the served OpenAPI document; any mismatch fails the run. A summary goes to
 * test-results/openapi-conformance.json.
 */
export async function checkObservedResponses(): Promise<void> {
  if (observed.length === 0) return;
  const conformance = await Conformance.of(await servedDocument());
  const failures = new Map<string, number>();
  const seen = new Set<string>();
  for (const o of observed) {
    for (const problem of conformance.check(o)) failures.set(problem, (failures.get(problem) ?? 0) + 1);
    seen.add(`${o.method} ${o.status}`);
  }
  mkdirSync('test-results', { recursive: true });
  writeFileSync('test-results/openapi-conformance.json', JSON.stringify({ observed: observed.length, failures: Object.fromEntries(failures) }, null, 2));
  if (failures.size > 0) {
    const list = [...failures].slice(0, 30).map(([p, n]) => `  ${p} (×${n})`);
    throw new Error(`${failures.size} kinds of response do not match the OpenAPI document (of ${observed.length} observed):\n${list.join('\n')}`);
  }
}
