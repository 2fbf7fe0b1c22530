import { AsyncLocalStorage } from 'node:async_hooks';
import type { Knex } from 'knex';

/**
 * A tenant's share of the pool: the requests of one tenant hold at most `tenantShare(poolMax)`
 * pooled connections at once; its further requests wait here, outside the pool's queue. Without
 * it, eight writes to one project that queue on the project's row lock held every connection of
 * a four-connection pool, and another tenant's read waited behind all of them in the pool's
 * first-come queue (a quarter of a second on a loaded machine). Work that is no request's (the
 * worker, group commits, periodic flushes) is not counted.
 */
export function tenantShare(poolMax: number): number {
  return Math.max(1, poolMax - Math.max(1, Math.floor(poolMax / 4)));
}

/** Thrown when a tenant's request waited for its share longer than the pool's acquire timeout; mapped like knex's own (pg-errors.ts). */
export class TenantShareTimeoutError extends Error {
  override readonly name = 'TenantShareTimeoutError';
}

/** One request's tenant, and how many of its slots that request holds now. */
interface Caller {
  readonly tenant: string;
  holding: number;
}

const tenants = new AsyncLocalStorage<Caller>();

/** Runs a request's remaining handling as `tenant`'s (an organisation, or the operator). */
export function asTenant<T>(tenant: string, run: () => T): T {
  return tenants.run({ tenant, holding: 0 }, run);
}

/**
 * Runs work a request starts beside itself (platform/db/held.ts, besideRequest) as the same
 * tenant's, with a count of its own: its connections take slots of the tenant's share like any
 * other of its requests (a shared count would let the second flow's go straight to the pool).
 */
export function besideTenant<T>(run: () => T): T {
  const caller = tenants.getStore();
  return caller === undefined ? run() : tenants.run({ tenant: caller.tenant, holding: 0 }, run);
}

/** Runs work that serves many requests (a group commit's statement): its connection is no tenant's. */
export function asNoTenant<T>(run: () => T): T {
  return tenants.exit(run);
}

interface Waiter {
  readonly resolve: () => void;
  readonly reject: (err: Error) => void;
  readonly timer: NodeJS.Timeout;
}

interface Held {
  held: number;
  readonly waiting: Waiter[];
}

interface PoolClient {
  acquireConnection(): Promise<object>;
  releaseConnection(connection: object): Promise<void>;
}

/** Per wrapped pool: how many requests wait for their tenant's share now. */
const waitingOf = new WeakMap<object, () => number>();

/** Requests of `db`'s pool waiting for their tenant's share (not in the pool's own pending count). */
export function shareWaiting(db: Knex): number {
  return waitingOf.get(db.client as object)?.() ?? 0;
}

/** Wraps `db`'s pool so that no tenant holds more than `cap` of its connections at once. */
export function sharePool(db: Knex, cap: number, timeoutMs: number): void {
  const client = db.client as PoolClient;
  if (waitingOf.has(client)) return;
  const acquire = client.acquireConnection.bind(client);
  const release = client.releaseConnection.bind(client);
  const byTenant = new Map<string, Held>();
  const owners = new WeakMap<object, Caller>();
  waitingOf.set(client, () => {
    let n = 0;
    for (const h of byTenant.values()) n += h.waiting.length;
    return n;
  });

  const take = (tenant: string): Promise<void> => {
    let h = byTenant.get(tenant);
    if (h === undefined) byTenant.set(tenant, (h = { held: 0, waiting: [] }));
    if (h.held < cap) {
      h.held++;
      return Promise.resolve();
    }
    const holding = h;
    return new Promise<void>((resolve, reject) => {
      const waiter: Waiter = {
        resolve,
        reject,
        timer: setTimeout(() => {
          const at = holding.waiting.indexOf(waiter);
          if (at >= 0) holding.waiting.splice(at, 1);
          reject(new TenantShareTimeoutError(`a tenant's request waited ${timeoutMs} ms for its share of the pool`));
        }, timeoutMs).unref(),
      };
      holding.waiting.push(waiter);
    });
  };
  const give = (tenant: string): void => {
    const h = byTenant.get(tenant);
    if (h === undefined) return;
    const next = h.waiting.shift();
    // The slot passes to the next waiter of the same tenant as it is.
    if (next !== undefined) {
      clearTimeout(next.timer);
      next.resolve();
      return;
    }
    h.held--;
    if (h.held === 0) byTenant.delete(tenant);
  };

  client.acquireConnection = async () => {
    const caller = tenants.getStore();
    // A request that already holds a slot goes straight to the pool: a nested acquisition (against
    // the rule of held.ts, which only the tests enforce) must not wait for its own tenant's share.
    if (caller === undefined || caller.holding > 0) return acquire();
    await take(caller.tenant);
    try {
      const connection = await acquire();
      owners.set(connection, caller);
      caller.holding++;
      return connection;
    } catch (err) {
      give(caller.tenant);
      throw err;
    }
  };
  client.releaseConnection = (connection) => {
    const caller = owners.get(connection);
    if (caller !== undefined) {
      owners.delete(connection);
      caller.holding--;
      give(caller.tenant);
    }
    return release(connection);
  };
}
