import type { EndpointDeps } from '../domain.js';
import type { ServiceKeys } from '../attestations/service-keys.js';
import { ValidationError } from '../../platform/http/errors.js';
import { type Static, Type } from '@sinclair/typebox';
import { Id, IdOut, PageQuery, pageOf, strictObject, Timestamp } from '../../platform/http/schemas.js';
import { component } from '../../platform/openapi/meta.js';
import { Readable } from 'node:stream';
import { declare, declareList, type Declaration } from '../../access/endpoints/declare.js';
import { auditOf, exportLines, VERIFY_CHECKPOINTS, VERIFY_WINDOW, verifyRecent } from './commands.js';
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

const Instant = Type.String({
  pattern: '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}(:[0-9]{2}(\\.[0-9]{1,6})?)?(Z|[+-][0-9]{2}:[0-9]{2})$',
  description: 'ISO 8601 with a time zone',
});
export const ListAuditQuery = strictObject({
  ...PageQuery,
  actor: Type.Optional(Type.String({ minLength: 1, maxLength: 64, description: 'exactly: `operator` or `token:<id>`' })),
  action: Type.Optional(Type.String({ minLength: 1, maxLength: 200, description: 'how the action begins, e.g. `POST /api/v1/organisations` or `console.`' })),
  target: Type.Optional(Type.String({ minLength: 1, maxLength: 200, description: 'exactly' })),
  from: Type.Optional(Instant),
  to: Type.Optional(Instant),
});

/** A time of the query, refused when it is no time at all (the pattern checks the shape; a day past the month's end rolls over, as Date reads it). */
function instant(name: 'from' | 'to', value: string | undefined): Date | undefined {
  if (value === undefined) return undefined;
  const at = new Date(value);
  if (Number.isNaN(at.getTime()))
    throw new ValidationError(`${name} is not a valid time.`, [{ in: 'query', path: `/${name}`, message: 'must be an ISO 8601 time' }]);
  return at;
}

export const AuditVerification = component(
  'AuditVerification',
  Type.Object(
    {
      ok: Type.Boolean(),
      rows: Type.Integer({ description: 'rows recomputed' }),
      checkpoints: Type.Integer({ description: 'signed checkpoints whose head is one of these rows' }),
      after: Type.Integer({ description: 'the rows verified are those after this sequence number' }),
      lastSeq: Type.Integer(),
      problem: Type.Optional(Type.Object({ seq: Type.Integer(), kind: Type.String(), message: Type.String() }, { additionalProperties: false })),
      lastCheckpoint: Type.Union([Type.Object({ size: Type.Integer(), time: Timestamp }, { additionalProperties: false }), Type.Null()]),
      unsealed: Type.Integer({ description: "the organisation's rows not sealed yet (they are within about a second)" }),
    },
    { additionalProperties: false },
  ),
);

/** `GET /organisations/{id}/audit`: the organisation's audit log, for its admins and the operator. */
export function auditEndpoints(deps: EndpointDeps, keys: ServiceKeys): Declaration[] {
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
        query: ListAuditQuery,
        doc: {
          operationId: 'listAudit',
          summary: "An organisation's audit log",
          description:
            "Every management write (actor, method and route, target, status, request id; ids only, never secrets), every key creation and console sign-in. For the operator and the organisation's admin tokens. Filters: `actor`, `target` (exactly), `action` (how it begins), `from` and `to` (times, `to` excluded).",
          tag: 'Organisations',
          responses: { 200: { description: 'A page of entries, oldest first.', schema: AuditList, example: { entries: [ex.auditEntry], nextCursor: null } } },
        },
      },
      async (ctx, { scope, paging, query }) => {
        const filter = { actor: query.actor, action: query.action, target: query.target, from: instant('from', query.from), to: instant('to', query.to) };
        const result = paging.pageOf(await auditOf(ctx.state.db, scope, paging.page, filter));
        ctx.body = { entries: result.items.map(presentAudit), nextCursor: result.nextCursor };
      },
    ),

    declare(
      {
        method: 'GET',
        path: '/api/v1/organisations/:id/audit/verification',
        auth: 'apiToken',
        tenant: { level: 'organisation', deleted: 'shown' },
        may: 'audit.read',
      },
      {
        params: strictObject({ id: Id }),
        doc: {
          operationId: 'verifyAudit',
          summary: "The audit chain's status over the organisation's newest rows",
          description: `Recomputes the organisation's newest ${VERIFY_WINDOW.toLocaleString('en')} sealed rows and checks the newest ${VERIFY_CHECKPOINTS} signed checkpoints whose heads are among them against the service's keys; says the deployment's last checkpoint and how many of the organisation's rows wait to be sealed. \`custody audit verify\` checks a whole export, and is what an auditor should run: this answer comes from the service itself.`,
          tag: 'Organisations',
          errors: { 503: 'dependency_unavailable: the signer cannot give its keys now (Retry-After).' },
          responses: {
            200: {
              description: 'The verification.',
              schema: AuditVerification,
              example: {
                ok: true,
                rows: 42,
                checkpoints: 1,
                after: 0,
                lastSeq: 97,
                lastCheckpoint: { size: 90, time: '2026-11-27T10:00:00.000Z' },
                unsealed: 0,
              },
            },
          },
        },
      },
      async (ctx, { scope }) => {
        ctx.set('Cache-Control', 'no-store');
        ctx.body = await verifyRecent(ctx.state.db, scope.organisationId, { keys: await keys.keys() });
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
