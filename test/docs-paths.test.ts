import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const NAMED = /(?<![\w/.-])((?:src|test|keyvault|contract|scripts|helm|migrations|docs|packages)\/[\w./-]*[\w/])/g;

function filesUnder(dir: string): string[] {
  return readdirSync(path.join(ROOT, dir)).flatMap((name) => {
    const rel = path.join(dir, name);
    return statSync(path.join(ROOT, rel)).isDirectory() ? filesUnder(rel) : [rel];
  });
}

describe('docs and comments name paths that exist', () => {
  it('every repository path named by the docs, the README or a comment of src/, keyvault/ or contract/ exists', () => {
    const sources = [
      'README.md',
      ...filesUnder('docs').filter((f) => /\.(md|ts|py|go|sh)$/.test(f)),
      'packages/client/README.md',
      'keyvault/README.md',
      ...['src', 'keyvault', 'contract'].flatMap(filesUnder).filter((f) => f.endsWith('.ts') || f.endsWith('.md')),
    ];
    const missing: string[] = [];
    for (const file of sources) {
      for (const [, named = ''] of readFileSync(path.join(ROOT, file), 'utf8').matchAll(NAMED)) {
        // A built file (dist/… .js) is named by its source.
        const candidates = [named, named.replace(/\.js$/, '.ts')];
        if (!candidates.some((c) => existsSync(path.join(ROOT, c)))) missing.push(`${file}: ${named}`);
      }
    }
    expect(missing).to.deep.equal([]);
  });
});
