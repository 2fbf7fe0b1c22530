import type { Declaration } from '../../access/endpoints/declare.js';

/**
 * The typed client's operation table (src/programs/client/operations.ts), written from the declarations:
 * every operation that answers JSON, but the reference's own. `scripts/client-operations.ts`
 * writes the file; test/programs/client/operations.test.ts fails when it is not what this gives.
 */
export function operationTable(declarations: readonly Declaration[]): string {
  const rows = declarations
    .filter(
      ({ schemas }) =>
        schemas.doc &&
        schemas.doc.tag !== 'Reference' &&
        Object.values(schemas.doc.responses).every((r) => (r.contentType ?? 'application/json') === 'application/json'),
    )
    .map(({ route, schemas }) => `  ${schemas.doc?.operationId ?? ''}: ['${route.method}', '${route.path.replace(/:(\w+)/g, '{$1}')}'],`);
  return `// Written by scripts/client-operations.ts from the service's endpoint declarations: do not edit.

/** operationId → method and path template, exactly as the OpenAPI document lists them. */
export const OPERATIONS = {
${rows.join('\n')}
} as const satisfies Record<string, readonly ['GET' | 'POST' | 'PUT' | 'DELETE', string]>;
`;
}
