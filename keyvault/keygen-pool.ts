import { defaultKeygenThreads } from './cpu.js';
import { Worker } from 'node:worker_threads';
import { SignerError } from './errors.js';
import { generateKey, type GeneratedKey } from './eth.js';

interface Reply {
  id: number;
  secret: Uint8Array;
  publicKey: Uint8Array;
  address: string;
}

/** The worker's code: generate, copy into buffers we transfer (no copy stays behind), zero the originals. */
const WORKER_SOURCE = `
const { parentPort } = require('node:worker_threads');
const url = process.env.CUSTODY_ETH_MODULE;
import(url).then(({ generateKey }) => {
  parentPort.on('message', (id) => {
    const key = generateKey();
    const secret = new Uint8Array(32);
    secret.set(key.secret);
    key.secret.fill(0);
    const publicKey = new Uint8Array(key.publicKey);
    parentPort.postMessage({ id, secret, publicKey, address: key.address }, [secret.buffer, publicKey.buffer]);
  });
  parentPort.postMessage('ready');
});
`;

/**
 * secp256k1 key generation is CPU-bound (about 1-2 ms per key); on one thread it caps the
 * signer at one core. A small pool of worker threads generates keys while the main thread
 * serves HTTP and waits on Vault. With `threads: 0` keys are generated inline.
 */
export class KeygenPool {
  readonly #workers: Worker[] = [];
  readonly #pending = new Map<number, { worker: Worker; resolve: (key: GeneratedKey) => void; reject: (err: Error) => void }>();
  #next = 0;
  #id = 0;

  constructor(threads = defaultKeygenThreads()) {
    const ethModule = new URL('./eth.js', import.meta.url).href;
    for (let i = 0; i < threads; i++) {
      const worker = new Worker(WORKER_SOURCE, { eval: true, env: { CUSTODY_ETH_MODULE: ethModule } });
      worker.on('message', (msg: Reply | 'ready') => {
        if (msg === 'ready') return;
        const waiting = this.#pending.get(msg.id);
        this.#pending.delete(msg.id);
        waiting?.resolve({ secret: msg.secret, publicKey: msg.publicKey, address: msg.address });
      });
      // A worker that fails takes its pending requests with it (they answer 500, nothing was stored).
      worker.on('error', () => {
        for (const [id, waiting] of this.#pending) {
          if (waiting.worker !== worker) continue;
          this.#pending.delete(id);
          waiting.reject(new SignerError('internal', 'key generation failed'));
        }
        this.#workers.splice(this.#workers.indexOf(worker), 1);
      });
      worker.unref();
      this.#workers.push(worker);
    }
  }

  generate(): Promise<GeneratedKey> {
    const worker = this.#workers[this.#next++ % Math.max(1, this.#workers.length)];
    if (!worker) return Promise.resolve(generateKey());
    const id = ++this.#id;
    return new Promise<GeneratedKey>((resolve, reject) => {
      this.#pending.set(id, { worker, resolve, reject });
      worker.postMessage(id);
    });
  }

  async close(): Promise<void> {
    await Promise.all(this.#workers.map((w) => w.terminate()));
  }
}
