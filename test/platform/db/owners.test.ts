import { expect } from 'chai';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { ALSO_READ_BY, TABLE_OWNERS, type Table } from '../../../src/platform/db/owners.js';
import { testDb } from '../../support/db.js';

const ROOT = fileURLToPath(new URL('../../../../', import.meta.url));
const SRC = path.join(ROOT, 'src');

/** A place in src/ that names a table in SQL. */
export interface TableUse {
  file: string;
  line: number;
  table: string;
  how: string;
}

/** Knex builder methods whose first argument is a table. */
const TABLE_METHODS = new Set([
  'from',
  'into',
  'table',
  'join',
  'innerJoin',
  'leftJoin',
  'leftOuterJoin',
  'rightJoin',
  'rightOuterJoin',
  'fullOuterJoin',
  'crossJoin',
  'hasTable',
  'createTable',
  'alterTable',
  'dropTable',
  'dropTableIfExists',
  'renameTable',
  'withSchema',
]);

/** A table named after an SQL keyword that takes one: FROM, JOIN, INTO, UPDATE, DELETE FROM, DELETE … USING, TRUNCATE, TABLE, LOCK. */
const SQL_TABLE = /\b(FROM|JOIN|INTO|UPDATE|USING|TRUNCATE|TABLE|LOCK)\s+(?:ONLY\s+)?(?:TABLE\s+)?(?:public\.)?"?([a-z_][a-z0-9_]*)"?/gi;
/** A string opening with a table and its column list: the target of an INSERT written elsewhere in the statement. */
const COLUMN_LIST = /^\s*([a-z_][a-z0-9_]*)\s*\(/i;
/** A knex table argument: `name` or `name as alias` (or `name alias`). */
const KNEX_TABLE = /^\s*([a-z_][a-z0-9_]*)(?:\s+(?:as\s+)?[a-z_][a-z0-9_]*)?\s*$/i;

function filesUnder(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const full = path.join(dir, name);
    return statSync(full).isDirectory() ? filesUnder(full) : name.endsWith('.ts') ? [full] : [];
  });
}

/** Every place `file` names one of `tables` in SQL: in a knex call, or in a string or template's text (comments are not read). */
export function tableUses(file: string, text: string, tables: ReadonlySet<string>): TableUse[] {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.ES2022, true);
  const uses: TableUse[] = [];
  const at = (node: ts.Node, table: string, how: string) => {
    if (tables.has(table)) uses.push({ file, line: source.getLineAndCharacterOfPosition(node.getStart()).line + 1, table, how });
  };
  const visit = (node: ts.Node): void => {
    if (ts.isCallExpression(node) && node.arguments.length > 0) {
      const first = node.arguments[0]!;
      const callee = node.expression;
      const method = ts.isPropertyAccessExpression(callee) ? callee.name.text : ts.isIdentifier(callee) ? callee.text : undefined;
      // db('t'), tx<Row>('t'), this.db('t'): a knex instance called with a table; .from('t'), .join('t', …): a builder method.
      const builderCall =
        ts.isIdentifier(callee) || (ts.isPropertyAccessExpression(callee) && (TABLE_METHODS.has(callee.name.text) || /db|tx|trx|knex/i.test(callee.name.text)));
      if (builderCall && (ts.isStringLiteral(first) || ts.isNoSubstitutionTemplateLiteral(first))) {
        const m = KNEX_TABLE.exec(first.text);
        if (m) at(first, m[1]!, `${method ?? 'call'}('${first.text}')`);
      }
    }
    const texts: string[] = [];
    if (ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node)) texts.push(node.text);
    else if (ts.isTemplateExpression(node)) texts.push([node.head.text, ...node.templateSpans.map((s) => s.literal.text)].join(' ${…} '));
    for (const t of texts) for (const m of t.matchAll(SQL_TABLE)) at(node, m[2]!, `${m[1]!.toUpperCase()} ${m[2]!}`);
    for (const t of texts) {
      const m = COLUMN_LIST.exec(t);
      if (m) at(node, m[1]!, `'${m[1]!} (…'`);
    }
    if (!ts.isTemplateExpression(node)) ts.forEachChild(node, visit);
    else for (const span of node.templateSpans) visit(span.expression);
  };
  visit(source);
  return uses;
}

/** The file's path under src/, with '/' separators. */
const folderOf = (file: string): string => path.relative(SRC, file).split(path.sep).join('/');
/** Whether a file (its path under src/) is inside a folder of src/ (an owner such as 'domains/wallets'). */
const inside = (rel: string, folder: string | undefined): boolean => folder !== undefined && rel.startsWith(`${folder}/`);

/** Every use of a table in src/ outside its owner's folder (and the folders ALSO_READ_BY names for it). */
export function strayUses(): TableUse[] {
  const tables = new Set<string>(Object.keys(TABLE_OWNERS));
  // A folder that only reads a table may name it after FROM, JOIN or USING, or in a knex call (a select there, by review).
  const reads = (u: TableUse) => /^(FROM|JOIN|USING) |^\w+\(/.test(u.how);
  const allowed = (u: TableUse, rel: string) =>
    inside(rel, TABLE_OWNERS[u.table as Table]) || ((ALSO_READ_BY[u.table as Table] ?? []).some((f) => inside(rel, f)) && reads(u));
  return filesUnder(SRC).flatMap((file) => tableUses(path.relative(ROOT, file), readFileSync(file, 'utf8'), tables).filter((u) => !allowed(u, folderOf(file))));
}

describe('Each table has one owner (src/platform/db/owners.ts)', () => {
  it('every table of the schema has an owner, and every owner is a folder of src/', async () => {
    const { rows } = await testDb().raw<{ rows: Array<{ tablename: string }> }>(
      `SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename`,
    );
    const tables = rows.map((r) => r.tablename);
    expect(tables, 'the migrations made these tables').to.include.members(['outbox', 'projects']);
    expect(
      tables.filter((t) => !(t in TABLE_OWNERS)),
      'tables with no owner in src/platform/db/owners.ts',
    ).to.deep.equal([]);
    expect(
      Object.keys(TABLE_OWNERS).filter((t) => !tables.includes(t)),
      'owners of tables the schema does not have',
    ).to.deep.equal([]);
    const folders = [...Object.values(TABLE_OWNERS), ...Object.values(ALSO_READ_BY).flat()];
    for (const folder of new Set(folders)) expect(statSync(path.join(SRC, folder)).isDirectory(), folder).to.be.true;
  });

  it('names each table in SQL only inside its owner’s folder', () => {
    const stray = strayUses().map((u) => `${u.file}:${u.line} ${u.how} (${u.table} belongs to src/${TABLE_OWNERS[u.table as Table]}/)`);
    expect(stray).to.deep.equal([]);
  });

  it('finds a table in every form of SQL the code writes', () => {
    const tables = new Set(['outbox', 'projects']);
    const found = (code: string) => tableUses('x.ts', code, tables).map((u) => u.table);
    expect(found(`db('outbox').where({ id })`)).to.deep.equal(['outbox']);
    expect(found(`tx<OutboxRow>('outbox as o').forUpdate()`)).to.deep.equal(['outbox']);
    expect(found(`db.table('outbox')`)).to.deep.equal(['outbox']);
    expect(found(`q.from('projects').join('outbox', 'o.project_id', 'projects.id')`)).to.have.members(['projects', 'outbox']);
    expect(found(`db.insert(row).into('outbox')`)).to.deep.equal(['outbox']);
    expect(found(`db.raw('SELECT 1 FROM outbox o WHERE o.id = ?', [1])`)).to.deep.equal(['outbox']);
    expect(found('db.raw(`UPDATE outbox SET x = ${y}`)')).to.deep.equal(['outbox']);
    expect(found('tx.raw(`WITH a AS (SELECT 1) DELETE FROM ${"x"} USING outbox`)')).to.deep.equal(['outbox']);
    expect(found('`INSERT INTO outbox (a) SELECT p.id FROM projects p JOIN x ON true`')).to.deep.equal(['outbox', 'projects']);
    expect(found('`TRUNCATE TABLE projects`')).to.deep.equal(['projects']);
    expect(found(`// SELECT 1 FROM outbox\nconst a = 1;`)).to.deep.equal([]);
    expect(found(`const ROW = 'outbox (project_id, kind)';`)).to.deep.equal(['outbox']);
    expect(found(`const label = 'projects';`)).to.deep.equal([]);
  });
});
