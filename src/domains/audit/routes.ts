import type { RouteDeps } from '../../access/endpoints/route-deps.js';
import { type Static, Type } from '@sinclair/typebox';
import { Id, IdOut, PageQuery, pageOf, strictObject, Timestamp } from '../../platform/http/schemas.js';
import { component } from '../../platform/openapi/meta.js';
import { declareList, type Declaration } from '../../access/endpoints/declare.js';
import { auditOf } from './commands.js';
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
  ];
}
