import { Type } from '@sinclair/typebox';
import { Id, Name, PageQuery, QueryBool, strictObject } from '../http/schemas.js';

export const OrganisationParams = strictObject({ id: Id });
export const OrganisationBody = strictObject({ name: Name });
export const ListOrganisationsQuery = strictObject({ showDeleted: Type.Optional(QueryBool), ...PageQuery });
