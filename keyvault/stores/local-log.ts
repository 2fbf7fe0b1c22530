import { closeSync, ftruncateSync, openSync, readdirSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs';
import { open, type FileHandle } from 'node:fs/promises';
import path from 'node:path';
import { SignerError } from '../errors.js';
import type { KeyRecord } from './types.js';

interface Waiting {
  record: KeyRecord;
  resolve(result: 'created' | 'exists'): void;
  reject(err: unknown): void;
}

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
};

/**
 * The local store's records: one append-only file of JSON lines, written with group commit (the
 * records that arrive while one batch is being made durable go together in the next write and
 * fdatasync), indexed in memory. Write-once holds because one process owns the file (a lock
 * file with its pid); a crash mid-write leaves at most a partial last line, cut off at the next start.
 */
export class KeyLog {
  readonly #file: string;
  readonly #lockFile: string;
  readonly #legacyDir: string;
  readonly #index = new Map<string, KeyRecord>();
  /** Key ids written or being written: a second putOnce for one is `exists`. */
  readonly #claimed = new Map<string, Promise<unknown>>();
  #handle: FileHandle | undefined;
  #size = 0;
  #queue: Waiting[] = [];
  #writing: Promise<void> | undefined;
  #broken: Error | undefined;

  constructor(dir: string) {
    this.#file = path.join(dir, 'keys.log');
    this.#lockFile = path.join(dir, 'keys.lock');
    this.#legacyDir = path.join(dir, 'keys');
  }

  /** Takes the lock (waiting up to `waitMs` for a previous owner to exit), then loads every record. */
  async open(waitMs: number): Promise<void> {
    const deadline = Date.now() + waitMs;
    for (;;) {
      try {
        writeFileSync(this.#lockFile, String(process.pid), { flag: 'wx', mode: 0o600 });
        break;
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
        const holder = Number(readFileSync(this.#lockFile, 'utf8').trim());
        if (!Number.isInteger(holder) || holder <= 0 || holder === process.pid || !alive(holder)) {
          unlinkSync(this.#lockFile);
          continue;
        }
        if (Date.now() > deadline) {
          throw new SignerError(
            'misconfigured',
            `the local key store in ${path.dirname(this.#file)} is in use by process ${holder}; run one signer per KEYVAULT_DATA_DIR`,
          );
        }
        await new Promise((r) => setTimeout(r, 100));
      }
    }
    this.#load();
    this.#handle = await open(this.#file, 'a', 0o600);
  }

  #load(): void {
    // Records of the one-file-per-key layout of earlier versions stay readable and write-once.
    let legacy: string[] = [];
    try {
      legacy = readdirSync(this.#legacyDir).filter((f) => f.endsWith('.json'));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
    for (const f of legacy) {
      const r = JSON.parse(readFileSync(path.join(this.#legacyDir, f), 'utf8')) as KeyRecord;
      this.#index.set(r.keyId, r);
    }
    let text: string;
    try {
      text = readFileSync(this.#file, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
      text = '';
    }
    // A crash mid-append leaves a partial last line: cut it, so the next append starts clean.
    const complete = text.endsWith('\n') || text === '' ? text : text.slice(0, text.lastIndexOf('\n') + 1);
    if (complete.length !== text.length) {
      const fd = openSync(this.#file, 'r+');
      ftruncateSync(fd, Buffer.byteLength(complete));
      closeSync(fd);
    }
    this.#size = Buffer.byteLength(complete);
    for (const line of complete.split('\n')) {
      if (line === '') continue;
      const r = JSON.parse(line) as KeyRecord;
      // One writer: a key id appears twice only if a write failed and was retried; the later one was answered.
      this.#index.set(r.keyId, r);
    }
  }

  get(keyId: string): KeyRecord | undefined {
    return this.#index.get(keyId);
  }

  /** Durable (fdatasync) before it resolves `created`; `exists` if the key id has a record or one on its way. */
  async putOnce(record: KeyRecord): Promise<'created' | 'exists'> {
    if (this.#broken) throw new SignerError('vault_unavailable', `the local key store cannot be written: ${this.#broken.message}`);
    if (!this.#handle) throw new SignerError('internal', 'the local key store is not open');
    if (this.#index.has(record.keyId)) return 'exists';
    const pending = this.#claimed.get(record.keyId);
    if (pending) {
      await pending.catch(() => undefined);
      if (this.#index.has(record.keyId)) return 'exists';
    }
    const done = new Promise<'created' | 'exists'>((resolve, reject) => this.#queue.push({ record, resolve, reject }));
    this.#claimed.set(record.keyId, done);
    this.#writing ??= this.#drain();
    try {
      return await done;
    } finally {
      this.#claimed.delete(record.keyId);
    }
  }

  /** Writes whatever is queued, batch after batch, until the queue is empty. */
  async #drain(): Promise<void> {
    while (this.#queue.length > 0) {
      const batch = this.#queue;
      this.#queue = [];
      const bytes = Buffer.from(batch.map((w) => `${JSON.stringify(w.record)}\n`).join(''), 'utf8');
      try {
        await this.#handle?.appendFile(bytes);
        await this.#handle?.datasync();
        this.#size += bytes.length;
        for (const w of batch) {
          this.#index.set(w.record.keyId, w.record);
          w.resolve('created');
        }
      } catch (err) {
        // Cut what part of the batch reached the file; if even that fails, refuse writes until restart.
        try {
          await this.#handle?.truncate(this.#size);
        } catch (cut) {
          this.#broken = cut instanceof Error ? cut : new Error(String(cut));
        }
        const failure = new SignerError('vault_unavailable', `the local key store write failed: ${err instanceof Error ? err.message : String(err)}`);
        for (const w of batch) w.reject(failure);
      }
    }
    this.#writing = undefined;
  }

  async close(): Promise<void> {
    await this.#writing;
    await this.#handle?.close();
    this.#handle = undefined;
    try {
      if (readFileSync(this.#lockFile, 'utf8').trim() === String(process.pid)) unlinkSync(this.#lockFile);
    } catch {
      // already gone
    }
  }
}
