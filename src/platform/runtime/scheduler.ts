import type { Logger } from '../logging/logger.js';

/** Which processes run a task: `api` (every API process), `worker` (ROLE=worker, or the API with RELAY_IN_API / ROLE=all). */
export type TaskRole = 'api' | 'worker';

/** Periodic work a domain or a platform module declares in its manifest. */
export interface PeriodicTask {
  /** Unique; named in logs and by `runNow`. */
  readonly name: string;
  readonly role: TaskRole;
  /** Milliseconds between the starts of two passes. */
  readonly everyMs: number;
  /** Run once at start as well as after each interval. */
  readonly atStart?: boolean;
  /** One pass; its result is logged at debug level only. */
  run(): Promise<unknown>;
}

/** The timer functions, injectable so a test decides when an interval has passed. */
export interface Timers {
  setInterval(fn: () => void, ms: number): unknown;
  clearInterval(handle: unknown): void;
}

const nodeTimers: Timers = {
  setInterval: (fn, ms) => setInterval(fn, ms).unref(),
  clearInterval: (handle) => clearInterval(handle as NodeJS.Timeout),
};

/**
 * The one scheduler of a process: each task on its own interval, single-flight (a pass that is
 * still running when the next is due is not started twice), and `stop()` waits for the passes in
 * flight. A pass that throws is logged and tried again at the next interval.
 */
export class Scheduler {
  readonly #tasks: readonly PeriodicTask[];
  readonly #running = new Map<string, Promise<unknown>>();
  readonly #handles: unknown[] = [];
  #stopped = false;

  constructor(
    tasks: readonly PeriodicTask[],
    private readonly log: Logger,
    private readonly timers: Timers = nodeTimers,
  ) {
    const names = new Set<string>();
    for (const t of tasks) {
      if (names.has(t.name)) throw new Error(`periodic task ${t.name} declared twice`);
      names.add(t.name);
    }
    this.#tasks = tasks;
  }

  get names(): string[] {
    return this.#tasks.map((t) => t.name);
  }

  start(): void {
    for (const task of this.#tasks) {
      this.#handles.push(this.timers.setInterval(() => void this.#pass(task), task.everyMs));
      if (task.atStart) void this.#pass(task);
    }
  }

  /** Runs the named task now (or joins its running pass) and resolves to the pass's result. */
  runNow(name: string): Promise<unknown> {
    const task = this.#tasks.find((t) => t.name === name);
    if (!task) throw new Error(`no periodic task ${name}`);
    return this.#pass(task);
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    for (const h of this.#handles.splice(0)) this.timers.clearInterval(h);
    await Promise.all(this.#running.values());
  }

  #pass(task: PeriodicTask): Promise<unknown> {
    const running = this.#running.get(task.name);
    if (running) return running;
    if (this.#stopped) return Promise.resolve(undefined);
    const pass = task
      .run()
      .then((result) => {
        this.log.debug({ task: task.name, result }, 'periodic task done');
        return result;
      })
      .catch((err: unknown) => {
        this.log.warn({ task: task.name, err: err instanceof Error ? err.message : String(err) }, `periodic task ${task.name} failed`);
        return undefined;
      })
      .finally(() => this.#running.delete(task.name));
    this.#running.set(task.name, pass);
    return pass;
  }
}
