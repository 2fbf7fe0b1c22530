// Shared with the demo: scripts/dev/wait.ts.
export { until } from '../../scripts/dev/wait.js';
