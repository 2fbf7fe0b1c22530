import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import type { Client } from './http.js';

export interface Org {
  id: number;
  name: string;
}
export interface Project {
  id: number;
  /** The project's random identity (what the signer knows it by; owners sign over it). */
  uid: string;
  organisationId: number;
  issuer?: string;
  projectKey: string;
  walletWebhookSecret?: string;
}
export interface Token {
  id: number;
  token: string;
}

const unique = (prefix: string) => `${prefix} ${randomUUID().slice(0, 8)}`;

/** Each test makes its own tenants through the API instead of truncating tables. */
export async function createOrganisation(operator: Client, name = unique('Org')): Promise<Org> {
  const res = await operator.post('/api/v1/organisations', { name });
  expect(res.status, res.text).to.equal(201);
  return res.body;
}

export async function createProject(client: Client, organisationId: number, body: Record<string, unknown> = {}): Promise<Project> {
  const res = await client.post(`/api/v1/organisations/${organisationId}/projects`, {
    name: unique('Project'),
    // An issuer of the organisation's own: organisations share one only with claims (domains/projects/issuer-binding.ts).
    issuer: `https://idp.example.com/org-${organisationId}`,
    ...body,
  });
  expect(res.status, res.text).to.equal(201);
  return res.body;
}

export async function createToken(client: Client, organisationId: number, role: 'admin' | 'read', projectId?: number): Promise<Token> {
  const res = await client.post(`/api/v1/organisations/${organisationId}/tokens`, {
    name: unique('token'),
    role,
    ...(projectId === undefined ? {} : { projectId }),
  });
  expect(res.status, res.text).to.equal(201);
  return res.body;
}

/** An organisation with one project and a token of every scope and role. */
export async function createTenant(operator: Client) {
  const org = await createOrganisation(operator);
  const project = await createProject(operator, org.id);
  const [orgAdmin, orgRead, projectAdmin, projectRead] = await Promise.all([
    createToken(operator, org.id, 'admin'),
    createToken(operator, org.id, 'read'),
    createToken(operator, org.id, 'admin', project.id),
    createToken(operator, org.id, 'read', project.id),
  ]);
  return {
    org,
    project,
    orgAdmin: operator.withToken(orgAdmin.token),
    orgRead: operator.withToken(orgRead.token),
    projectAdmin: operator.withToken(projectAdmin.token),
    projectRead: operator.withToken(projectRead.token),
    tokens: { orgAdmin, orgRead, projectAdmin, projectRead },
  };
}
