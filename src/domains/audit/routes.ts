import type { RouteDeps } from '../../access/endpoints/route-deps.js';
import { type Static, Type } from '@sinclair/typebox';
import { Id, IdOut, PageQuery, pageOf, strictObject, Timestamp } from '../../platform/http/schemas.js';
import { component } from '../../platform/openapi/meta.js';
import { Readable } from 'node:stream';
import { declare, declareList, type Declaration } from '../../access/endpoints/declare.js';
import { auditOf, exportLines } from './commands.js';
import { presentAudit } from './presenter.js';
import * as ex from '../../platform/openapi/examples.js';

export const AuditEntryOut = component(
  'AuditEntry',
  Type.Object(
    {
      id: IdOut,
      at: Timestamp,
      organisationId: Type.Union([IdOut, Type.Null()]),
      projectId: Type.Union([IdOut, Type.Null()]),
      actor: Type.String({ description: 'operator, or token:<id>' }),
      action: Type.String({ description: '<METHOD> <route>, or an event such as wallet.key_created' }),
      target: Type.Union([Type.String(), Type.Null()]),
      status: Type.Union([Type.Integer(), Type.Null()]),
      requestId: Type.Union([Type.String(), Type.Null()]),
      details: Type.Record(Type.String(), Type.Unknown()),
    },
    { additionalProperties: false },
  ),
);
export const AuditList = pageOf('entries', AuditEntryOut);

/** Rows of one export at most: a SIEM resumes from the last sequence number. */
const EXPORT_MAX = 100_000;
export type AuditListOut = Static<typeof AuditList>;

/** `GET /organisations/{id}/audit`: the organisation's audit log, for its admins and the operator. */
export function auditEndpoints(_deps: RouteDeps): Declaration[] {
  return [
    declareList(
      {
        method: 'GET',
        path: '/api/v1/organisations/:id/audit',
        auth: 'apiToken',
        // Another tenant (and any project token) does not see the organisation: 404; a read token: 403.
        tenant: { level: 'organisation', deleted: 'shown' },
        may: 'audit.read',
      },
      {
        params: strictObject({ id: Id }),
        query: strictObject({ ...PageQuery }),
        doc: {
          operationId: 'listAudit',
          summary: "An organisation's audit log",
          description:
            "Every management write (actor, method and route, target, status, request id; ids only, never secrets) and every key creation. For the operator and the organisation's admin tokens.",
          tag: 'Organisations',
          responses: { 200: { description: 'A page of entries, oldest first.', schema: AuditList, example: { entries: [ex.auditEntry], nextCursor: null } } },
        },
      },
      async (ctx, { scope, paging }) => {
        const result = paging.pageOf(await auditOf(ctx.state.db, scope, paging.page));
        ctx.body = { entries: result.items.map(presentAudit), nextCursor: result.nextCursor };
      },
    ),

    declare(
      {
        method: 'GET',
        path: '/api/v1/organisations/:id/audit/export',
        auth: 'apiToken',
        tenant: { level: 'organisation', deleted: 'shown' },
        may: 'audit.read',
      },
      {
        params: strictObject({ id: Id }),
        query: strictObject({
          after: Type.Optional(
            Type.String({ pattern: '^(0|[1-9][0-9]{0,14})$', description: 'resume after this sequence number (default 0: from the start)' }),
          ),
          limit: Type.Optional(Type.String({ pattern: '^[1-9][0-9]{0,6}$', description: `rows at most (default and maximum ${EXPORT_MAX})` })),
        }),
        doc: {
          operationId: 'exportAudit',
          summary: "An organisation's audit log with its chain fields, as NDJSON",
          description:
            "For a SIEM or `custody audit verify --file`. Lines: `{type:'export', organisationId, after}`, then one `{type:'entry', seq, id, at, …, prevHash, hash}` per sealed row in chain order, the signed checkpoints (`{type:'checkpoint', size, head, time, jws}`), and `{type:'end', lastSeq, more}`: when `more`, ask again with `after=lastSeq`. Rows not sealed yet (a fraction of a second) come in a later export. docs/audit.md says what verifying one organisation's export proves.",
          tag: 'Organisations',
          responses: {
            200: {
              description: 'NDJSON, streamed.',
              contentType: 'application/x-ndjson',
              schema: Type.String(),
              example: '{"type":"export","organisationId":1,"after":0}\n{"type":"end","lastSeq":0,"more":false}\n',
            },
          },
        },
      },
      // eslint-disable-next-line @typescript-eslint/require-await -- the stream runs after the handler returns
      async (ctx, { scope, query }) => {
        const after = Number(query.after ?? 0);
        const limit = Math.min(Number(query.limit ?? EXPORT_MAX), EXPORT_MAX);
        ctx.type = 'application/x-ndjson';
        ctx.set('Cache-Control', 'no-store');
        ctx.body = Readable.from(exportLines(ctx.state.db, scope.organisationId, after, limit));
      },
    ),
  ];
}
