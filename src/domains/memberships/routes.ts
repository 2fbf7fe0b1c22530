import type { RouteDeps } from '../../access/endpoints/route-deps.js';
import { queryBool } from '../../platform/http/schemas.js';
import { atProject, declare, declareList, type Declaration } from '../../access/endpoints/declare.js';
import { issueMemberships, revokeMembershipCommand, transferMembership, viewProjectMemberships } from './commands.js';
import { presentMembership } from './presenter.js';
import { mapInTurns } from '../../platform/runtime/turns.js';
import { IssueBody, IssuedOut, MembershipList, MembershipOut, ProjectQuery, RevokeBody, TransferBody, ViewQuery } from './schemas.js';
import * as ex from '../../platform/openapi/examples.js';

/** The four membership endpoints of the interface document, with docs/interface.md section 7. */
export function membershipEndpoints({ now }: RouteDeps): Declaration[] {
  const seconds = (ms: number) => Math.floor(ms / 1000);

  return [
    declare(
      {
        method: 'POST',
        path: '/api/v1/membership/issue',
        ...atProject('membership.write', 'query'),
        write: { idempotent: true, target: 'none' },
      },
      {
        query: ProjectQuery,
        body: IssueBody,
        doc: {
          operationId: 'issueMemberships',
          summary: 'Issue memberships (1 to 1,000, all or nothing)',
          description:
            'One active membership per wallet and type: an existing one is `409 already_member` (per item in `errors`) unless `override`, which updates it in place. Expired memberships free their place. Duplicates within a batch are 400.',
          tag: 'Memberships',
          requestExample: [{ membershipType: 'gym:gold', walletAddress: ex.exampleAddress, expiration: 1_830_297_600, transferable: true }],
          errors: {
            404: 'not_found: `projectId` names a project outside the token’s scope.',
            409: 'already_member: an item conflicts with an active membership (errors names each); nothing was issued.',
          },
          responses: {
            201: { description: 'The issued (or overridden) memberships, in request order.', schema: IssuedOut, example: { memberships: [ex.membership] } },
          },
        },
      },
      async (ctx, { scope, body }) => {
        const { project } = scope;
        const at = now();
        const rows = await issueMemberships(ctx.state.db, project, body, at);
        ctx.status = 201;
        ctx.body = { memberships: await mapInTurns(rows, (m) => presentMembership(m, seconds(at))) };
      },
    ),

    declare(
      {
        method: 'POST',
        path: '/api/v1/membership/revoke',
        ...atProject('membership.write', 'query'),
        write: { idempotent: true, target: { answer: 'tokenId' } },
      },
      {
        query: ProjectQuery,
        body: RevokeBody,
        doc: {
          operationId: 'revokeMembership',
          summary: 'Revoke a membership (soft) or delete it (hardDelete)',
          description:
            'Soft: the record stays with status `revoked` (revoking twice returns it again). `hardDelete: true` removes it from every view (204); its ledger entries stay.',
          tag: 'Memberships',
          requestExample: { tokenId: '901' },
          errors: { 404: 'not_found: no such membership (or project) in the token’s scope.' },
          responses: {
            200: { description: 'The revoked membership.', schema: MembershipOut, example: { ...ex.membership, status: 'revoked', revokedAt: ex.exampleAt } },
            204: { description: 'Deleted (hardDelete).' },
          },
        },
      },
      async (ctx, { scope, body }) => {
        const { project } = scope;
        const at = now();
        const row = await revokeMembershipCommand(ctx.state.db, project, body, at);
        if (row === null) {
          ctx.status = 204;
          return;
        }
        ctx.body = presentMembership(row, seconds(at));
      },
    ),

    declare(
      {
        method: 'POST',
        path: '/api/v1/membership/transfer',
        ...atProject('membership.write', 'query'),
        write: { idempotent: true, target: { answer: 'tokenId' } },
      },
      {
        query: ProjectQuery,
        body: TransferBody,
        doc: {
          operationId: 'transferMembership',
          summary: 'Transfer a membership to another wallet',
          description: 'Checked in order: 400, 404, holder_mismatch, membership_inactive, not_transferable, already_member.',
          tag: 'Memberships',
          requestExample: { from: ex.exampleAddress, to: '0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359', tokenId: '901' },
          errors: {
            404: 'not_found: no such membership (or project) in the token’s scope.',
            409: 'holder_mismatch (`from` does not hold it), membership_inactive (revoked or expired), not_transferable, or already_member (`to` holds an active one of that type).',
          },
          responses: {
            200: {
              description: 'The membership with its new holder.',
              schema: MembershipOut,
              example: { ...ex.membership, walletAddress: '0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359' },
            },
          },
        },
      },
      async (ctx, { scope, body }) => {
        const { project } = scope;
        const at = now();
        ctx.body = presentMembership(await transferMembership(ctx.state.db, project, body, at), seconds(at));
      },
    ),

    declareList(
      {
        method: 'GET',
        path: '/api/v1/membership/view',
        ...atProject('membership.read', 'query'),
      },
      {
        query: ViewQuery,
        doc: {
          operationId: 'viewMemberships',
          summary: "List a project's memberships",
          description: 'Filters: `walletAddress` (any case), `membershipType`; revoked and expired ones only when asked.',
          tag: 'Memberships',
          errors: { 404: 'not_found: `projectId` names a project outside the token’s scope.' },
          responses: { 200: { description: 'A page of memberships.', schema: MembershipList, example: { memberships: [ex.membership], nextCursor: null } } },
        },
      },
      async (ctx, { query, scope, paging }) => {
        const { project } = scope;
        const nowS = seconds(now());
        const filter = {
          walletAddress: query.walletAddress,
          membershipType: query.membershipType,
          includeRevoked: queryBool(query.includeRevoked),
          includeExpired: queryBool(query.includeExpired),
        };
        const result = paging.pageOf(await viewProjectMemberships(ctx.state.db, project, filter, nowS, paging.page));
        ctx.body = { memberships: result.items.map((m) => presentMembership(m, nowS)), nextCursor: result.nextCursor };
      },
    ),
  ];
}
