import { closeSync, ftruncateSync, openSync, readdirSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs';
import { open, type FileHandle } from 'node:fs/promises';
import path from 'node:path';
import { SignerError } from '../errors.js';

interface Waiting<T> {
  record: T;
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
 * fdatasync), indexed in memory by `idOf`. Write-once holds because one process owns the store's
 * directory (a lock file with its pid, taken by the log given `lockFile`); a crash mid-write
 * leaves at most a partial last line, cut off at the next start.
 */
export class RecordLog<T extends object> {
  readonly #file: string;
  readonly #lockFile: string | undefined;
  readonly #legacyDir: string | undefined;
  readonly #index = new Map<string, T>();
  /** Ids written or being written: a second putOnce for one is `exists`. */
  readonly #claimed = new Map<string, Promise<unknown>>();
  #handle: FileHandle | undefined;
  #size = 0;
  #queue: Array<Waiting<T>> = [];
  #writing: Promise<void> | undefined;
  #broken: Error | undefined;

  /** `legacyDir`: one JSON file per record, the layout of earlier versions of the key log, still read. */
  constructor(
    file: string,
    private readonly idOf: (record: T) => string,
    options: { lockFile?: string; legacyDir?: string } = {},
  ) {
    this.#file = file;
    this.#lockFile = options.lockFile;
    this.#legacyDir = options.legacyDir;
  }

  /** Takes the lock (waiting up to `waitMs` for a previous owner to exit), then loads every record. */
  async open(waitMs: number): Promise<void> {
    if (this.#lockFile) await this.#lock(this.#lockFile, waitMs);
    this.#load();
    this.#handle = await open(this.#file, 'a', 0o600);
  }

  async #lock(lockFile: string, waitMs: number): Promise<void> {
    const deadline = Date.now() + waitMs;
    for (;;) {
      try {
        writeFileSync(lockFile, String(process.pid), { flag: 'wx', mode: 0o600 });
        break;
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
        const holder = Number(readFileSync(lockFile, 'utf8').trim());
        if (!Number.isInteger(holder) || holder <= 0 || holder === process.pid || !alive(holder)) {
          unlinkSync(lockFile);
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
  }

  #load(): void {
    // Records of the one-file-per-key layout of earlier versions stay readable and write-once.
    let legacy: string[] = [];
    const legacyDir = this.#legacyDir;
    try {
      if (legacyDir) legacy = readdirSync(legacyDir).filter((f) => f.endsWith('.json'));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
    for (const f of legacy) {
      const r = JSON.parse(readFileSync(path.join(legacyDir ?? '', f), 'utf8')) as T;
      this.#index.set(this.idOf(r), r);
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
      const r = JSON.parse(line) as T;
      // One writer: an id appears twice only if a write failed and was retried; the later one was answered.
      this.#index.set(this.idOf(r), r);
    }
  }

  get(id: string): T | undefined {
    return this.#index.get(id);
  }

  /** Every record whose id starts with `prefix` (a project's policy versions). */
  withPrefix(prefix: string): T[] {
    return [...this.#index].filter(([id]) => id.startsWith(prefix)).map(([, r]) => r);
  }

  /** Durable (fdatasync) before it resolves `created`; `exists` if the id has a record or one on its way. */
  async putOnce(record: T): Promise<'created' | 'exists'> {
    if (this.#broken) throw new SignerError('vault_unavailable', `the local key store cannot be written: ${this.#broken.message}`);
    if (!this.#handle) throw new SignerError('internal', 'the local key store is not open');
    const id = this.idOf(record);
    if (this.#index.has(id)) return 'exists';
    const pending = this.#claimed.get(id);
    if (pending) {
      await pending.catch(() => undefined);
      if (this.#index.has(id)) return 'exists';
    }
    const done = new Promise<'created' | 'exists'>((resolve, reject) => this.#queue.push({ record, resolve, reject }));
    this.#claimed.set(id, done);
    this.#writing ??= this.#drain();
    try {
      return await done;
    } finally {
      this.#claimed.delete(id);
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
          this.#index.set(this.idOf(w.record), w.record);
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
      if (this.#lockFile && readFileSync(this.#lockFile, 'utf8').trim() === String(process.pid)) unlinkSync(this.#lockFile);
    } catch {
      // already gone
    }
  }
}
