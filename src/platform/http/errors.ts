/** A problem in one field of a request, as listed in a problem+json `errors` array. */
export interface FieldProblem {
  /** Where the problem is when not in the body: `params` (the path) or `query`. */
  in?: 'params' | 'query' | 'body';
  /** JSON Pointer into that part, e.g. `/0/walletAddress`. */
  path: string;
  message: string;
}

/**
 * Every error the service answers on purpose. `code` is the stable machine code of docs/interface.md
 * section 2 (extend, never rename); `detail` is safe to show to the caller.
 */
export class AppError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    readonly title: string,
    readonly detail: string,
    readonly errors?: FieldProblem[],
    readonly headers: Record<string, string> = {},
  ) {
    super(detail);
    this.name = new.target.name;
  }
}

export class ValidationError extends AppError {
  constructor(detail: string, errors?: FieldProblem[], code = 'validation_failed') {
    super(400, code, 'Bad Request', detail, errors);
  }
}

export class UnauthorizedError extends AppError {
  constructor(detail = 'A valid API token is required in the Authorization header (Bearer).') {
    super(401, 'unauthorized', 'Unauthorized', detail, undefined, { 'WWW-Authenticate': 'Bearer' });
  }
}

export class ForbiddenError extends AppError {
  constructor(detail = 'This token may not perform this action.') {
    super(403, 'forbidden', 'Forbidden', detail);
  }
}

export class NotFoundError extends AppError {
  constructor(detail = 'No such resource.') {
    super(404, 'not_found', 'Not Found', detail);
  }
}

export class MethodNotAllowedError extends AppError {
  constructor(allowed: string[]) {
    super(405, 'method_not_allowed', 'Method Not Allowed', `Allowed methods: ${allowed.join(', ')}.`, undefined, {
      Allow: allowed.join(', '),
    });
  }
}

export class ConflictError extends AppError {
  constructor(detail: string, code = 'conflict', errors?: FieldProblem[]) {
    super(409, code, 'Conflict', detail, errors);
  }
}

export class PayloadTooLargeError extends AppError {
  constructor(limit: string) {
    super(413, 'payload_too_large', 'Payload Too Large', `The request body exceeds ${limit}.`);
  }
}

export class IdempotencyKeyReusedError extends AppError {
  constructor() {
    super(422, 'idempotency_key_reused', 'Unprocessable Content', 'This Idempotency-Key was already used for a different request (method, path or body).');
  }
}

/** A dependency (database, signer, Vault) is down: the caller retries after `Retry-After`. */
export class DependencyUnavailableError extends AppError {
  constructor(dependency: string, retryAfterS = 5) {
    super(503, 'dependency_unavailable', 'Service Unavailable', `The ${dependency} is unavailable; retry later.`, undefined, {
      'Retry-After': String(retryAfterS),
    });
  }
}

/**
 * The signer holds another request's key under a key id this deployment just chose, or its store
 * belongs to another deployment: never an address to hand out (docs/interface.md section 5). Logged at
 * error: it means a shared or restored store, which an operator must look at.
 */
export class KeyConflictError extends AppError {
  constructor(
    readonly reason: 'key_conflict' | 'store_owned',
    readonly why: string,
  ) {
    super(
      503,
      'key_conflict',
      'Service Unavailable',
      "The key store refused this wallet's key as a conflict; the operator has been alerted. Retry later.",
      undefined,
      {
        'Retry-After': '30',
      },
    );
  }
}
