import { AsyncLocalStorage } from 'node:async_hooks';
import type { Knex } from 'knex';
import { asNoTenant, besideTenant } from './share.js';

/**
 * The rule "a request never waits for a pooled connection while it holds one" (docs/security.md):
 * when as many requests as the pool has connections each hold one and wait for a second, none
 * gets it until the acquire timeout, and every tenant's requests wait with them.
 *
 * This module lets the tests enforce it on every request: `watchPool` wraps a pool's acquire and
 * release, `watchRequest` runs a request with a count of the connections it holds, and asking for
 * one (or for work that needs one: `needsConnection`) while the count is above zero throws
 * NestedAcquisitionError at once. Production sets none of it up, so the hooks used in the code
 * (`needsConnection`, `outsideRequests`) only read an empty AsyncLocalStorage there.
 */
export class NestedAcquisitionError extends Error {
  override readonly name = 'NestedAcquisitionError';
}

interface Holding {
  held: number;
  readonly nested: (err: NestedAcquisitionError) => void;
}

const requests = new AsyncLocalStorage<Holding>();

/** Runs one request's handling, counting what it holds; `nested` hears of every breach (it is also thrown). */
export function watchRequest<T>(nested: (err: NestedAcquisitionError) => void, run: () => T): T {
  return requests.run({ held: 0, nested }, run);
}

/**
 * Runs work that serves many requests and that none of them holds (a group commit's statement, a
 * periodic flush): its connection is its own, whichever request's turn of the event loop started it.
 */
export function outsideRequests<T>(run: () => T): T {
  return requests.exit(() => asNoTenant(run));
}

/**
 * Runs work a request starts that may go on after its answer (a queue's turn, sending what was
 * queued behind the request's own send): a flow of its own, counted apart from the request's for
 * this rule and in the tenant's share (share.ts, besideTenant). Each flow holds one connection at a
 * time; a request that holds one may not start such a flow (it might wait for it), as it may not
 * wait for a group commit.
 */
export function besideRequest<T>(run: () => T): T {
  needsConnection('work beside the request started');
  const holding = requests.getStore();
  return besideTenant(() => (holding === undefined ? run() : requests.run({ held: 0, nested: holding.nested }, run)));
}

/** The caller is about to wait for a pooled connection, its own or one taken for it (a group commit). */
export function needsConnection(what: string): void {
  const holding = requests.getStore();
  if (holding === undefined || holding.held === 0) return;
  const err = new NestedAcquisitionError(`${what} while this request holds ${holding.held} pooled connection(s)`);
  holding.nested(err);
  throw err;
}

/** The part of knex's client that takes connections from its pool (hotQuery uses it too). */
interface PoolClient {
  acquireConnection(): Promise<object>;
  releaseConnection(connection: object): Promise<void>;
}

const watched = new WeakSet<object>();

/**
 * Counts each connection `db`'s pool hands out against the request that asked for it, until it is
 * released. A transaction's own queries and savepoints reuse its connection without asking the pool.
 */
export function watchPool(db: Knex): void {
  const client = db.client as PoolClient;
  if (watched.has(client)) return;
  watched.add(client);
  const acquire = client.acquireConnection.bind(client);
  const release = client.releaseConnection.bind(client);
  const holders = new WeakMap<object, Holding>();
  client.acquireConnection = async () => {
    needsConnection('a pooled connection asked for');
    const connection = await acquire();
    const holding = requests.getStore();
    if (holding !== undefined) {
      holding.held++;
      holders.set(connection, holding);
    }
    return connection;
  };
  client.releaseConnection = (connection) => {
    const holding = holders.get(connection);
    if (holding !== undefined) {
      holding.held--;
      holders.delete(connection);
    }
    return release(connection);
  };
}
