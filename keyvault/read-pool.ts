import { deserialize } from 'node:v8';
import { Worker } from 'node:worker_threads';
import { parseBody, readRequest, type Envelope, type RequestKind } from './envelope.js';
import type { SignerErrorCode } from '../contract/index.js';
import { SignerError } from './errors.js';
import { LIMITS } from './limits.js';
import type { Signature } from './sign/ecdsa.js';
import type { Json } from './sign/input.js';
import { Deferred, Meter } from './sign/meter.js';
import { operationOf, type Operation, type OperationData } from './sign/operation.js';
import type { Transaction } from './sign/transaction.js';
import { parsePolicy, type Policy } from './policy/document.js';

/** What the main thread asks a reading thread (keyvault/read-worker.ts). */
export type Job = { id: number } & (
  { type: 'read'; kind: RequestKind; body: Uint8Array } | { type: 'serialize'; tx: Transaction; sig: Signature } | { type: 'policy'; document: unknown }
);

/** What a reading thread answers: plain data (structured clone), a refusal as the signer's code. */
export type Reply =
  | { id: number; ok: true; type: 'read'; envelope: Envelope; data: OperationData; message?: Uint8Array }
  | { id: number; ok: true; type: 'serialize'; signedTransaction: Uint8Array; hash: Uint8Array }
  | { id: number; ok: true; type: 'policy'; policy: Policy }
  | { id: number; ok: false; code: SignerErrorCode; message: string };

type Ask = Job extends infer J ? (J extends Job ? Omit<J, 'id'> : never) : never;

interface Waiting {
  job: Job;
  resolve: (reply: Reply & { ok: true }) => void;
  reject: (err: Error) => void;
}

export interface ReadOperation {
  envelope: Envelope;
  operation: Operation;
}

/**
 * Reading operations without holding the event loop (issue 30). A signing or evaluate body is read
 * on the main thread only when it is small (LIMITS.inline.bodyBytes) and its reading stays within
 * the main thread's budget (LIMITS.inline.work, counted by a Meter as it goes: a SIWE message, an
 * EIP-2612 permit); anything else, up to the shape limits, is parsed and hashed by one of `threads`
 * worker threads, in the order it came, at most LIMITS.queue waiting (then 503 `busy`). A large
 * signed transaction is assembled there too, and policy documents are read there. With `threads` 0
 * everything is read inline, unbudgeted.
 */
export class ReadPool {
  readonly #workers = new Set<Worker>();
  readonly #idle: Worker[] = [];
  readonly #queue: Waiting[] = [];
  readonly #running = new Map<Worker, Waiting>();
  #id = 0;
  #closed = false;
  /** Operations read on a worker thread, for tests and the benchmark. */
  offloaded = 0;

  constructor(readonly threads: number) {
    for (let i = 0; i < threads; i++) this.#spawn();
  }

  #spawn(): void {
    const worker = new Worker(new URL('./read-worker.js', import.meta.url));
    worker.unref();
    this.#workers.add(worker);
    worker.on('message', (reply: Reply | 'ready') => {
      if (reply !== 'ready') {
        const waiting = this.#running.get(worker);
        this.#running.delete(worker);
        if (waiting) {
          if (reply.ok) waiting.resolve(reply);
          else waiting.reject(new SignerError(reply.code, reply.message));
        }
      }
      this.#idle.push(worker);
      this.#next();
    });
    // A thread that dies takes its job with it (answered 500, nothing signed) and is replaced.
    const lost = () => {
      if (!this.#workers.delete(worker)) return;
      const i = this.#idle.indexOf(worker);
      if (i >= 0) this.#idle.splice(i, 1);
      this.#running.get(worker)?.reject(new SignerError('internal', 'reading the operation failed'));
      this.#running.delete(worker);
      if (!this.#closed) this.#spawn();
    };
    worker.on('error', lost);
    worker.on('exit', lost);
  }

  #next(): void {
    while (this.#idle.length > 0 && this.#queue.length > 0) {
      const worker = this.#idle.pop();
      const waiting = this.#queue.shift();
      if (!worker || !waiting) return;
      this.#running.set(worker, waiting);
      worker.postMessage(waiting.job);
    }
  }

  /** Operations wait in turn, at most LIMITS.queue; a policy (rare: a write, a version new to this signer) goes first, unbounded. */
  #submit(ask: Ask): Promise<Reply & { ok: true }> {
    const first = ask.type === 'policy';
    if (!first && this.#queue.length >= LIMITS.queue) return Promise.reject(new SignerError('busy', 'every operation-reading thread is busy; retry shortly'));
    return new Promise((resolve, reject) => {
      const waiting = { job: { ...ask, id: ++this.#id }, resolve, reject };
      if (first) this.#queue.unshift(waiting);
      else this.#queue.push(waiting);
      this.#next();
    });
  }

  /** A body of `kind` (bytes as received) → its envelope and operation, or the signer's refusal. */
  async read(kind: RequestKind, raw: Uint8Array): Promise<ReadOperation> {
    if (this.#workers.size === 0 && this.threads === 0) return inline(kind, raw, new Meter());
    if (raw.length <= LIMITS.inline.bodyBytes) {
      try {
        return inline(kind, raw, Meter.inline());
      } catch (err) {
        if (!(err instanceof Deferred)) throw err;
      }
    }
    this.offloaded++;
    const reply = await this.#submit({ type: 'read', kind, body: raw });
    if (reply.type !== 'read') throw new SignerError('internal', 'unexpected reply');
    const { message } = reply;
    let read: Json | undefined;
    const operation = operationOf(reply.data, {
      ...(message ? { message: () => (read ??= deserialize(message) as Json) } : {}),
      serialize: async (tx, sig) => {
        const done = await this.#submit({ type: 'serialize', tx, sig });
        if (done.type !== 'serialize') throw new SignerError('internal', 'unexpected reply');
        return done;
      },
    });
    return { envelope: reply.envelope, operation };
  }

  /**
   * A policy document read strictly (parsePolicy) on a reading thread: one of thousands of
   * checksummed addresses costs a hash each (75 ms measured for 7,000), which no other request's
   * event loop should wait for. Inline with no threads.
   */
  async policy(document: unknown): Promise<Policy> {
    if (this.threads === 0) return parsePolicy(document);
    const reply = await this.#submit({ type: 'policy', document });
    if (reply.type !== 'policy') throw new SignerError('internal', 'unexpected reply');
    return reply.policy;
  }

  async close(): Promise<void> {
    this.#closed = true;
    for (const waiting of this.#queue.splice(0)) waiting.reject(new SignerError('internal', 'the signer is stopping'));
    await Promise.all([...this.#workers].map((w) => w.terminate()));
  }
}

function inline(kind: RequestKind, raw: Uint8Array, meter: Meter): ReadOperation {
  const { envelope, data, message } = readRequest(kind, parseBody(raw), meter);
  return { envelope, operation: operationOf(data, message ? { message: () => message } : {}) };
}
