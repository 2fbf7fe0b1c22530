import { monitorEventLoopDelay } from 'node:perf_hooks';

/**
 * Loaded into the service under test with `--import` (bench/hostile.ts), and so into its signer
 * child too (fork passes the parent's flags on): the event loop's delay sampled every millisecond.
 * On SIGUSR2 it prints the longest stall since the last SIGUSR2 to stderr as `STALL <pid> <ms>`
 * and starts over. Nothing else of the process changes.
 */
const histogram = monitorEventLoopDelay({ resolution: 1 });
histogram.enable();
process.on('SIGUSR2', () => {
  process.stderr.write(`STALL ${process.pid} ${(histogram.max / 1e6).toFixed(2)}\n`);
  histogram.reset();
});
