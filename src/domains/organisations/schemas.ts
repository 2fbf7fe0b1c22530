import { Type } from '@sinclair/typebox';
import { Id, IdOut, Name, NullableTimestamp, pageOf, PageQuery, QueryBool, strictObject, Timestamp } from '../../platform/http/schemas.js';
import { component } from '../../platform/openapi/meta.js';

export const OrganisationParams = strictObject({ id: Id });
export const OrganisationBody = strictObject({ name: Name });
export const ListOrganisationsQuery = strictObject({
  showDeleted: Type.Optional(QueryBool),
  name: Type.Optional(Type.String({ minLength: 1, maxLength: 200, description: 'organisations whose name contains this, in any case' })),
  ...PageQuery,
});

export const OrganisationOut = component(
  'Organisation',
  Type.Object({ id: IdOut, name: Type.String(), createdAt: Timestamp, updatedAt: Timestamp, deletedAt: NullableTimestamp }, { additionalProperties: false }),
);
export const OrganisationList = pageOf('organisations', OrganisationOut);
