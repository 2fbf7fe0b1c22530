import { expect } from 'chai';
import { Scheduler, type PeriodicTask, type Timers } from '../../../src/platform/runtime/scheduler.js';
import { createLogger } from '../../../src/platform/logging/logger.js';

/** Timers the test fires by hand: an interval passes when `tick()` says so. */
function manualTimers(): Timers & { tick(): void; live: number } {
  const handles = new Set<{ fn: () => void }>();
  return {
    setInterval: (fn) => {
      const h = { fn };
      handles.add(h);
      return h;
    },
    clearInterval: (h) => handles.delete(h as { fn: () => void }),
    tick: () => handles.forEach((h) => h.fn()),
    get live() {
      return handles.size;
    },
  };
}

describe('the scheduler', () => {
  it('runs a task at each interval, never twice at once, and stop() waits for the pass in flight', async () => {
    const timers = manualTimers();
    let running = 0;
    let most = 0;
    let passes = 0;
    let release: () => void = () => undefined;
    const task: PeriodicTask = {
      name: 'slow',
      role: 'worker',
      everyMs: 1_000,
      run: async () => {
        running++;
        most = Math.max(most, running);
        await new Promise<void>((r) => (release = r));
        running--;
        passes++;
      },
    };
    const scheduler = new Scheduler([task], createLogger('silent'), timers);
    scheduler.start();
    expect(passes).to.equal(0);
    timers.tick();
    timers.tick();
    timers.tick();
    expect(running).to.equal(1);
    const stopped = scheduler.stop();
    let done = false;
    void stopped.then(() => (done = true));
    await new Promise((r) => setImmediate(r));
    expect(done, 'stop waits for the pass').to.equal(false);
    release();
    await stopped;
    expect({ passes, most, live: timers.live }).to.deep.equal({ passes: 1, most: 1, live: 0 });
    timers.tick();
    expect(running).to.equal(0);
  });

  it('logs a failed pass and runs the task again at the next interval', async () => {
    const timers = manualTimers();
    let calls = 0;
    const task: PeriodicTask = {
      name: 'flaky',
      role: 'api',
      everyMs: 10,
      atStart: true,
      run: () => (++calls === 1 ? Promise.reject(new Error('database gone')) : Promise.resolve(calls)),
    };
    const scheduler = new Scheduler([task], createLogger('silent'), timers);
    scheduler.start();
    await new Promise((r) => setImmediate(r));
    expect(calls).to.equal(1);
    timers.tick();
    expect(await scheduler.runNow('flaky')).to.equal(2);
    await scheduler.stop();
  });

  it('refuses two tasks of one name', () => {
    const t: PeriodicTask = { name: 'x', role: 'api', everyMs: 1, run: () => Promise.resolve() };
    expect(() => new Scheduler([t, t], createLogger('silent'))).to.throw(/declared twice/);
  });
});
