/** The console's one way to the API: same origin, the session cookie, the CSRF token on every write. */

export interface Problem {
  status: number;
  title: string;
  detail: string;
  code?: string;
  errors?: Array<{ in?: string; path?: string; message: string }>;
}

export class ApiError extends Error {
  constructor(readonly problem: Problem) {
    super(problem.detail || problem.title);
  }
}

export interface Principal {
  scope: 'operator' | 'organisation' | 'project';
  role: 'admin' | 'read' | 'signer';
  tokenId?: number;
  organisationId?: number;
  projectId?: number;
  /** The actions of the service's policy table this token may take. */
  may: string[];
}

export interface Session {
  principal: Principal;
  csrfToken: string;
  expiresAt: string;
}

let csrf = '';
/** Called when the API says the session is over (401): the app goes back to sign-in. */
let onSignedOut: () => void = () => undefined;

export function useSession(s: Session | null, signedOut: () => void): void {
  csrf = s?.csrfToken ?? '';
  onSignedOut = signedOut;
}

const problemOf = async (res: Response): Promise<Problem> => {
  try {
    const body = (await res.json()) as Partial<Problem>;
    return { ...body, status: res.status, title: body.title ?? res.statusText, detail: body.detail ?? '' };
  } catch {
    return { status: res.status, title: res.statusText || 'Error', detail: `The service answered ${res.status}.` };
  }
};

/** A JSON call; a problem answer is thrown as ApiError. Writes carry the CSRF token and a fresh Idempotency-Key. */
export async function api<T>(method: string, path: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = { Accept: 'application/json' };
  if (method !== 'GET') {
    headers['X-CSRF-Token'] = csrf;
    if (method === 'POST') headers['Idempotency-Key'] = crypto.randomUUID();
  }
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  let res: Response;
  try {
    res = await fetch(path, { method, headers, credentials: 'same-origin', ...(body !== undefined ? { body: JSON.stringify(body) } : {}) });
  } catch {
    throw new ApiError({ status: 0, title: 'Network error', detail: 'The service could not be reached.' });
  }
  if (res.status === 401 && !path.startsWith('/console/session')) onSignedOut();
  if (!res.ok) throw new ApiError(await problemOf(res));
  if (res.status === 204) return undefined as T;
  const type = res.headers.get('content-type') ?? '';
  return (type.includes('json') ? await res.json() : await res.text()) as T;
}

/** A path with a query of the given values (empty ones left out). */
export function withQuery(path: string, query: Record<string, string | number | boolean | undefined | null>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) if (v !== undefined && v !== null && v !== '' && v !== false) q.set(k, String(v));
  const s = q.toString();
  return s ? `${path}?${s}` : path;
}

export async function signIn(token: string): Promise<Session> {
  return api<Session>('POST', '/console/session', { token });
}
export async function currentSession(): Promise<Session | null> {
  try {
    return await api<Session>('GET', '/console/session');
  } catch (err) {
    if (err instanceof ApiError && err.problem.status === 401) return null;
    throw err;
  }
}
export async function signOut(): Promise<void> {
  await api<void>('DELETE', '/console/session');
}
