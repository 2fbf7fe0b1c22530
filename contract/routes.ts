/**
 * The signer's routes (keyvault/README.md): the signer dispatches from this table and the API's
 * client builds its paths from it, so neither can name a route the other lacks. `{name}` is a
 * path parameter, matched by PARAMS.
 */
export const SIGNER_ROUTES = [
  // For the orchestrator's probes: no credentials.
  { name: 'healthz', method: 'GET', path: '/healthz', auth: false },
  { name: 'readyz', method: 'GET', path: '/readyz', auth: false },
  { name: 'bindDeployment', method: 'POST', path: '/v1/deployment', auth: true },
  { name: 'createKey', method: 'POST', path: '/v1/keys', auth: true },
  { name: 'sign', method: 'POST', path: '/v1/keys/{keyId}/sign', auth: true },
  { name: 'getKey', method: 'GET', path: '/v1/keys/{keyId}', auth: true },
  { name: 'putPolicy', method: 'PUT', path: '/v1/projects/{projectId}/policy', auth: true },
  { name: 'getPolicy', method: 'GET', path: '/v1/projects/{projectId}/policy', auth: true },
  { name: 'listPolicyVersions', method: 'GET', path: '/v1/projects/{projectId}/policy/versions', auth: true },
  { name: 'getPolicyVersion', method: 'GET', path: '/v1/projects/{projectId}/policy/versions/{version}', auth: true },
  { name: 'evaluate', method: 'POST', path: '/v1/projects/{projectId}/policy/evaluate', auth: true },
  { name: 'putOwners', method: 'PUT', path: '/v1/projects/{projectId}/owners', auth: true },
  { name: 'getOwners', method: 'GET', path: '/v1/projects/{projectId}/owners', auth: true },
  { name: 'carryDocuments', method: 'POST', path: '/v1/projects/{projectId}/carry-over/documents', auth: true },
  { name: 'carryKeys', method: 'POST', path: '/v1/projects/{projectId}/carry-over/keys', auth: true },
  // The service key (contract/service.ts): signs the fixed purposes only; its public keys for the JWKS.
  { name: 'serviceSign', method: 'POST', path: '/v1/service/sign', auth: true },
  { name: 'serviceKeys', method: 'GET', path: '/v1/service/keys', auth: true },
  { name: 'health', method: 'GET', path: '/v1/health', auth: true },
] as const;

export type SignerRoute = (typeof SIGNER_ROUTES)[number];
export type SignerRouteName = SignerRoute['name'];

/**
 * What each path parameter matches. Ids take any segment so that a malformed one is answered
 * `400 invalid_request` (by the signer's one rule for it), not `404`; a version is a positive integer.
 */
export const PARAMS = { keyId: '[^/]+', projectId: '[^/]+', version: '[1-9][0-9]{0,8}' } as const;

/**
 * Every path under this prefix names a project: the signer reads the identity, by one rule, before
 * it looks for the route, so a malformed id is refused whatever follows it.
 */
export const PROJECT_SCOPE = '/v1/projects/{projectId}/';

/** The parameter names of a path, from its text. */
type ParamsOf<P extends string> = P extends `${string}{${infer N}}${infer Rest}` ? N | ParamsOf<Rest> : never;
export type RouteParams<N extends SignerRouteName> = Record<ParamsOf<Extract<SignerRoute, { name: N }>['path']>, string>;

/** The route named `name`. */
export const routeNamed = <N extends SignerRouteName>(name: N): Extract<SignerRoute, { name: N }> =>
  SIGNER_ROUTES.find((r): r is Extract<SignerRoute, { name: N }> => r.name === name) as Extract<SignerRoute, { name: N }>;

/** The path of a route, each parameter encoded as one segment. */
export function pathTo<N extends SignerRouteName>(name: N, params: RouteParams<N>): string {
  const values: Record<string, string> = params;
  return routeNamed(name).path.replace(/\{(\w+)\}/g, (_, p: string) => {
    const v = values[p];
    if (v === undefined) throw new Error(`no ${p} for the signer route ${name}`);
    return encodeURIComponent(v);
  });
}

/** A path's pattern: its parameters as named groups (PARAMS), anchored at the start and, unless `prefix`, at the end. */
export function pathPattern(path: string, prefix = false): RegExp {
  const params: Readonly<Record<string, string>> = PARAMS;
  const body = path.replace(/\{(\w+)\}/g, (_, p: string) => {
    const pattern = params[p];
    if (pattern === undefined) throw new Error(`the signer route ${path} has a parameter PARAMS lacks: ${p}`);
    return `(?<${p}>${pattern})`;
  });
  return new RegExp(`^${body}${prefix ? '' : '$'}`);
}

const COMPILED = SIGNER_ROUTES.map((route) => ({ route, pattern: pathPattern(route.path) }));
const SCOPE = pathPattern(PROJECT_SCOPE, true);

/** The route a request asks for, with its parameters as sent (not decoded), or undefined. */
export function matchRoute(method: string, pathname: string): { route: SignerRoute; params: Readonly<Record<string, string>> } | undefined {
  for (const { route, pattern } of COMPILED) {
    if (route.method !== method) continue;
    const m = pattern.exec(pathname);
    if (m) return { route, params: { ...m.groups } };
  }
  return undefined;
}

/** The project id a path under PROJECT_SCOPE names, as sent, whatever route follows; undefined elsewhere. */
export const scopedProject = (pathname: string): string | undefined => SCOPE.exec(pathname)?.groups?.['projectId'];
