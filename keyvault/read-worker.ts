import { parentPort } from 'node:worker_threads';
import { serialize } from 'node:v8';
import { parseBody, readRequest } from './envelope.js';
import { SignerError } from './errors.js';
import { parsePolicy } from './policy/document.js';
import { Meter } from './sign/meter.js';
import { serializeSigned } from './sign/transaction.js';
import type { Job, Reply } from './read-pool.js';

/**
 * A reading thread of keyvault/read-pool.ts: parses and hashes operations (no budget but the
 * shape limits), assembles signed transactions and reads policy documents, one job at a time. It
 * sees request bodies, policies and signatures, never a key.
 */
const port = parentPort;
if (!port) throw new Error('read-worker runs as a worker thread');

function run(job: Job): Reply {
  if (job.type === 'policy') return { id: job.id, ok: true, type: 'policy', policy: parsePolicy(job.document) };
  if (job.type === 'serialize') {
    const { signedTransaction, hash } = serializeSigned(job.tx, job.sig);
    return { id: job.id, ok: true, type: 'serialize', signedTransaction, hash };
  }
  const { envelope, data, message } = readRequest(job.kind, parseBody(job.body), new Meter());
  // The message as one buffer: the main thread reads it again only if a rule names one of its leaves.
  return { id: job.id, ok: true, type: 'read', envelope, data, ...(message ? { message: serialize(message) } : {}) };
}

port.on('message', (job: Job) => {
  let reply: Reply;
  try {
    reply = run(job);
  } catch (err) {
    reply =
      err instanceof SignerError
        ? { id: job.id, ok: false, code: err.code, message: err.message }
        : { id: job.id, ok: false, code: 'internal', message: 'reading the operation failed' };
  }
  port.postMessage(reply);
});
port.postMessage('ready');
