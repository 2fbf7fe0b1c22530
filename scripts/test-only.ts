import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * `npm run test:only -- test/x.test.ts [more…]`: runs the named suites alone (compiled, with the
 * suite's root hooks and settings of .mocharc.json), where `npm test` runs them all. Source paths
 * are mapped to their build (`test/x.test.ts` → `dist/test/x.test.js`); mocha's own flags pass
 * through (`--grep`, `--bail`, …).
 */
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const rc = JSON.parse(readFileSync(path.join(ROOT, '.mocharc.json'), 'utf8')) as { timeout: number; require: string[]; reporter: string };

const args = process.argv.slice(2);
const files: string[] = [];
const flags: string[] = [];
// A suite is a *.test.ts (or built *.test.js) path; everything else is mocha's (`--grep foo`).
for (const arg of args) {
  if (/\.test\.ts$/.test(arg)) files.push(path.join('dist', arg.replace(/\.ts$/, '.js')));
  else if (/\.test\.js$/.test(arg)) files.push(arg);
  else flags.push(arg);
}
if (files.length === 0) {
  process.stderr.write('usage: npm run test:only -- test/<suite>.test.ts [more suites] [mocha flags]\n');
  process.exit(2);
}
for (const f of files) {
  if (!existsSync(path.join(ROOT, f))) {
    process.stderr.write(`no such suite: ${f} (is it under test/ and named *.test.ts?)\n`);
    process.exit(2);
  }
}
const mocha = path.join(ROOT, 'node_modules/mocha/bin/mocha.js');
const res = spawnSync(
  process.execPath,
  [mocha, '--no-config', '--timeout', String(rc.timeout), '--reporter', rc.reporter, ...rc.require.flatMap((r) => ['--require', r]), ...flags, ...files],
  {
    cwd: ROOT,
    stdio: 'inherit',
  },
);
process.exit(res.status ?? 1);
