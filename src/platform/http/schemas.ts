import { Type, type TArray, type TProperties, type TSchema } from '@sinclair/typebox';
import { component } from '../openapi/meta.js';

/** Path ids are positive integers that fit a PostgreSQL bigint and a JS number exactly. */
export const Id = Type.String({ pattern: '^[1-9][0-9]{0,14}$', description: 'a positive integer id' });

/** Booleans in a query string: `true|false|1|0` (docs/interface.md section 7). */
export const QueryBool = Type.Union([Type.Literal('true'), Type.Literal('false'), Type.Literal('1'), Type.Literal('0')]);
export const queryBool = (v: string | undefined): boolean => v === 'true' || v === '1';

/** Cursor paging of section 10: `limit` 1–1,000 (default 100), `cursor` opaque. */
export const PageQuery = {
  limit: Type.Optional(Type.String({ pattern: '^(1000|[1-9][0-9]{0,2})$', description: 'page size, 1 to 1000' })),
  cursor: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
} satisfies TProperties;

export const Name = Type.String({ minLength: 1, maxLength: 200, pattern: '\\S' });

export const strictObject = <P extends TProperties>(properties: P) => Type.Object(properties, { additionalProperties: false });

// ---- Responses: the presenters are typed from these, and the OpenAPI document lists them. ----

export const Timestamp = Type.String({ format: 'date-time', description: 'ISO 8601, UTC' });
export const NullableTimestamp = Type.Union([Timestamp, Type.Null()]);
export const IdOut = Type.Integer({ minimum: 1 });
export const NextCursor = Type.Union([Type.String(), Type.Null()], { description: 'pass as `cursor` for the next page; null on the last page' });

/** A page of `items` under the list's own name, with `nextCursor` (docs/interface.md section 10). */
export const pageOf = <K extends string, T extends TSchema>(key: K, item: T) =>
  Type.Object({ [key]: Type.Array(item), nextCursor: NextCursor } as { [P in K]: TArray<T> } & { nextCursor: typeof NextCursor }, {
    additionalProperties: false,
  });

/** RFC 9457 problem details with the service's `code` and `requestId` (docs/interface.md section 2). */
export const Problem = component(
  'Problem',
  Type.Object(
    {
      type: Type.String({ description: 'urn:custody:problem:<code>' }),
      title: Type.String(),
      status: Type.Integer({ minimum: 400, maximum: 599 }),
      detail: Type.String(),
      code: Type.String({ pattern: '^[a-z][a-z0-9_]*$', description: 'stable snake_case machine code' }),
      requestId: Type.String(),
      errors: Type.Optional(
        Type.Array(Type.Object({ in: Type.Optional(Type.String()), path: Type.String(), message: Type.String() }, { additionalProperties: false })),
      ),
    },
    { additionalProperties: false },
  ),
);
