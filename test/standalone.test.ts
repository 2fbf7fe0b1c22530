import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
/** Documents that live beside a checkout, never in it: a file naming them points outside the repository. */
const OUTSIDE = /\.\.\/shared\b|\b(?:CONTRACT|SIGNER|SIGNING|EXECUTION|NOTES)\.md\b|\bseed\/000_/;
const LINK = /\]\(([^)\s#]+)(?:#[^)]*)?\)/g;

describe('the repository stands alone', () => {
  const tracked = execFileSync('git', ['ls-files', '-z'], { cwd: ROOT, encoding: 'utf8' })
    .split('\0')
    .filter((f) => f !== '' && !f.startsWith('bench/results/') && !/\.(png|ico|lock)$/.test(f) && f !== 'package-lock.json');

  it('no file, comment or doc names a document outside the repository', () => {
    const naming = tracked.flatMap((file) =>
      readFileSync(path.join(ROOT, file), 'utf8')
        .split('\n')
        .flatMap((line, i) => (OUTSIDE.test(line) && file !== 'test/standalone.test.ts' ? [`${file}:${i + 1}: ${line.trim().slice(0, 120)}`] : [])),
    );
    expect(naming).to.deep.equal([]);
  });

  it('every relative link of a Markdown file stays inside the repository', () => {
    const escaping = tracked
      .filter((f) => f.endsWith('.md'))
      .flatMap((file) =>
        [...readFileSync(path.join(ROOT, file), 'utf8').matchAll(LINK)]
          .map((m) => m[1] ?? '')
          .filter((target) => !/^[a-z]+:/i.test(target))
          .filter((target) => path.relative(ROOT, path.resolve(ROOT, path.dirname(file), target)).startsWith('..'))
          .map((target) => `${file}: ${target}`),
      );
    expect(escaping).to.deep.equal([]);
  });
});
