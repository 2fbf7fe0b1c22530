#!/usr/bin/env node
/**
 * `custody`: the operator's command line. Talks to a running service through the typed client
 * (src/programs/client) with an API token; `migrate` talks to the database directly.
 * Exit codes: 0 done, 1 refused by the service (4xx) or a failed check, 2 usage, 3 service unavailable.
 */
import { run } from './run.js';

process.exitCode = await run(process.argv.slice(2));
