import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { format, resolveConfig } from 'prettier';
import { operationTable } from '../../../src/platform/openapi/operations.js';
import { startApp } from '../../support/app.js';
import { OPERATIONS, type OperationId } from '../../../src/programs/client/index.js';
import type { OperationFor, SuccessBody } from '../../support/operations.js';

// The test client's replies are typed by matching its path against the typed client's table
// (support/operations.ts). These checks run at compile time: a wrong match fails `npm run build`.
type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
type Assert<T extends true> = T;
type Sample<T extends string> = T extends `${infer A}{${string}}${infer B}` ? `${A}${number}${Sample<B>}` : T;
type Method<O extends OperationId> = (typeof OPERATIONS)[O][0];

/** Every operation's own path, its parameters filled in and a query added, is read as that operation. */
export type EveryOperationResolvesToItself = Assert<
  Equal<{ [O in OperationId]: OperationFor<Method<O>, Sample<(typeof OPERATIONS)[O][1]>> }, { [O in OperationId]: O }>
>;
export type QueriesAreIgnored = Assert<Equal<OperationFor<'GET', `/api/v1/project/${number}/wallets?limit=${number}`>, 'listWallets'>>;
/** A literal word of the table is not a parameter: `failedDeliveries` is not a webhook id. */
export type LiteralsWin = Assert<Equal<OperationFor<'GET', `/api/v1/project/${number}/webhooks/failedDeliveries`>, 'listFailedDeliveries'>>;
export type UnknownRoutesAreUnknown = Assert<Equal<SuccessBody<'GET', '/api/v1/nope'>, unknown>>;
export type WrongMethodIsUnknown = Assert<Equal<OperationFor<'PUT', '/api/v1/signin'>, never>>;
export type ExtraSegmentsDoNotMatch = Assert<Equal<OperationFor<'GET', `/api/v1/project/${number}/wallets/${number}/more`>, never>>;

describe('test client typing', () => {
  it('has an operation table whose templates the type-level matcher can read (one {param} per segment)', () => {
    for (const [operation, [, template]] of Object.entries(OPERATIONS)) {
      for (const segment of template.split('/')) expect(/^\{\w+\}$|^[^{}]*$/.test(segment), `${operation}: ${segment}`).to.equal(true);
    }
  });
});

describe('the typed client operation table', () => {
  it('is the one the endpoint declarations give (npm run client:operations writes it)', async () => {
    const app = await startApp();
    try {
      const file = fileURLToPath(new URL('../../../../src/programs/client/operations.ts', import.meta.url));
      const options = (await resolveConfig(file)) ?? {};
      expect(await format(operationTable(app.mounted), { ...options, parser: 'typescript' })).to.equal(await readFile(file, 'utf8'));
    } finally {
      await app.close();
    }
  });
});
