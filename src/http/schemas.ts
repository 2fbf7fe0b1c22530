import { Type, type TProperties } from '@sinclair/typebox';

/** Path ids are positive integers that fit a PostgreSQL bigint and a JS number exactly. */
export const Id = Type.String({ pattern: '^[1-9][0-9]{0,14}$', description: 'a positive integer id' });

/** Booleans in a query string: `true|false|1|0` (CONTRACT.md section 7). */
export const QueryBool = Type.Union([Type.Literal('true'), Type.Literal('false'), Type.Literal('1'), Type.Literal('0')]);
export const queryBool = (v: string | undefined): boolean => v === 'true' || v === '1';

/** Cursor paging of section 10: `limit` 1–1,000 (default 100), `cursor` opaque. */
export const PageQuery = {
  limit: Type.Optional(Type.String({ pattern: '^(1000|[1-9][0-9]{0,2})$', description: 'page size, 1 to 1000' })),
  cursor: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
} satisfies TProperties;

export const Name = Type.String({ minLength: 1, maxLength: 200, pattern: '\\S' });

export const strictObject = <P extends TProperties>(properties: P) => Type.Object(properties, { additionalProperties: false });
