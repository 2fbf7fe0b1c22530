import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { compactVerify, createLocalJWKSet, type JSONWebKeySet } from 'jose';
import type { Knex } from 'knex';
import { rowHash, type ChainEntry, type SealedEntry, type VerifyReport } from '../../../src/domains/audit/chain.js';
import { readChain, verifyRecent } from '../../../src/domains/audit/commands.js';
import { recordAudit } from '../../../src/domains/audit/record.js';
import { entryOf, sealedRows } from '../../../src/domains/audit/repository.js';
import { checkpointAuditLog, sealAuditLog } from '../../../src/domains/audit/seal.js';
import { readDeploymentId } from '../../../src/platform/db/deployment.js';
import { migrateLatest } from '../../../src/platform/db/migrate.js';
import { SignerClient } from '../../../src/platform/signer/client.js';
import { startApp, type TestApp } from '../../support/app.js';
import { migrateTo, ownDatabase, shareRunDeployment } from '../../support/db.js';
import * as insertOnly from '../../../migrations/20261127010000_audit_chain_insert_only.js';
import { createTenant } from '../../support/factories.js';
import { sharedSigner } from '../../support/signer.js';
import { until } from '../../support/wait.js';

const CLI = path.resolve('dist/src/programs/cli/main.js');

function custody(args: string[], env: Record<string, string>): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [CLI, ...args], { env: { PATH: process.env['PATH'] ?? '', ...env }, timeout: 120_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout, stderr });
    });
  });
}

/** The canonical row written out by hand, keys in alphabetical order: what the chain's hash covers. */
function byHand(r: {
  seq: number;
  id: number;
  at: string;
  organisation_id: number | null;
  project_id: number | null;
  actor: string;
  action: string;
  target: string | null;
  status: number | null;
  request_id: string | null;
  details: Record<string, unknown>;
}): string {
  const sorted = (v: unknown): unknown =>
    v !== null && typeof v === 'object' && !Array.isArray(v)
      ? Object.fromEntries(
          Object.keys(v)
            .sort()
            .map((k) => [k, sorted((v as Record<string, unknown>)[k])]),
        )
      : v;
  return JSON.stringify({
    action: r.action,
    actor: r.actor,
    at: r.at,
    details: sorted(r.details),
    id: r.id,
    organisationId: r.organisation_id,
    projectId: r.project_id,
    requestId: r.request_id,
    seq: r.seq,
    status: r.status,
    target: r.target,
  });
}

const AT = `to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS at`;
/** Each chain entry with its audit row's columns, as the chain hashes them. */
const CHAINED = `SELECT c.seq, a.id, c.prev_hash, c.hash, ${AT}, a.organisation_id, a.project_id, a.actor, a.action, a.target, a.status, a.request_id, a.details
  FROM audit_chain c JOIN audit_log a ON a.id = c.audit_id`;
/** The audit row at a place of the chain, in a WHERE clause (`?` the seq). */
const ROW_AT = 'id = (SELECT audit_id FROM audit_chain WHERE seq = ?)';
/** Committed audit rows with no chain entry. */
const unsealedCount = async (db: Knex) =>
  Number(
    (
      await db.raw<{ rows: Array<{ n: number }> }>(
        'SELECT count(*)::int AS n FROM audit_log a WHERE NOT EXISTS (SELECT 1 FROM audit_chain c WHERE c.audit_id = a.id)',
      )
    ).rows[0]?.n,
  );
const chainSize = async (db: Knex) => (await db('audit_chain').max<{ max: number | null }>('seq as max').first())?.max ?? 0;
const floorOf = async (db: Knex) =>
  BigInt((await db.raw<{ rows: Array<{ f: string }> }>('SELECT xid_floor::text AS f FROM audit_chain_state')).rows[0]?.f ?? '0');

describe('audit log as a hash chain: sealing, signed checkpoints, verification, export', function () {
  this.timeout(120_000);
  let own: Awaited<ReturnType<typeof ownDatabase>>;
  let app: TestApp;
  let signer: SignerClient;
  let jwks: JSONWebKeySet;
  let dir: string;
  let cliEnv: Record<string, string>;
  /** Two signed checkpoints: of `early` rows, and of the whole chain (`size`). */
  const chain = { early: 0, size: 0 };

  const direct = (db: Knex, n: number, organisationId: number | null = null) =>
    Promise.all(
      Array.from({ length: n }, (_, i) =>
        recordAudit(db, {
          organisation_id: organisationId,
          project_id: null,
          actor: 'operator',
          action: 'test.direct',
          target: `t${i}`,
          status: 200,
          request_id: `r${i}`,
          details: { i, nested: { b: 1, a: [2, 'x'] } },
        }),
      ),
    );

  before(async () => {
    own = await ownDatabase(`custody_chain_${Date.now()}_${process.pid}`);
    await migrateLatest(own.db);
    await shareRunDeployment(own.db);
    app = await startApp({}, own.db);
    const s = sharedSigner();
    signer = new SignerClient(s.url, s.token, 10_000, await readDeploymentId(own.db));
    jwks = (await (await fetch(`${app.url}/.well-known/jwks.json`)).json()) as JSONWebKeySet;
    dir = mkdtempSync(path.join(tmpdir(), 'custody-chain-'));
    writeFileSync(path.join(dir, 'jwks.json'), JSON.stringify(jwks));
    cliEnv = { CUSTODY_URL: app.url, CUSTODY_TOKEN: app.operatorToken, DATABASE_URL: own.url };
  });
  after(async () => {
    await app?.close();
    await own?.drop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('seals every committed row once, in the order the sealer sees them committed, hash = SHA-256(previous hash ‖ canonical row); writers are not held', async () => {
    // Audited management writes, concurrently, through the API.
    const created = await Promise.all(Array.from({ length: 8 }, (_, i) => app.client.post('/api/v1/organisations', { name: `chain ${i}` })));
    for (const r of created) expect(r.status, r.text).to.equal(201);
    // A transaction that inserted its row first and commits last: its id is lower than the rows after it.
    const late = await own.db.transaction();
    await recordAudit(late, {
      organisation_id: null,
      project_id: null,
      actor: 'operator',
      action: 'test.late',
      target: null,
      status: 200,
      request_id: 'late',
      details: {},
    });
    const lateId = (await late<{ id: number }>('audit_log').where('request_id', 'late').first('id'))?.id ?? 0;
    // Other writers commit meanwhile: nothing waits for the open transaction or for the chain.
    const started = Date.now();
    await direct(own.db, 5);
    expect(Date.now() - started).to.be.below(2_000);
    expect(await sealAuditLog(own.db)).to.be.at.least(13);
    expect(await own.db('audit_chain').where('audit_id', lateId).first()).to.equal(undefined, 'not visible to the sealer yet');
    await late.commit();
    expect(await sealAuditLog(own.db)).to.equal(1);
    expect(await unsealedCount(own.db)).to.equal(0);
    const rows = (await own.db.raw(`${CHAINED} ORDER BY c.seq`)).rows as Array<Parameters<typeof byHand>[0] & { prev_hash: Buffer; hash: Buffer }>;
    expect(rows.map((r) => r.seq)).to.deep.equal(rows.map((_, i) => i + 1));
    const lastRow = rows[rows.length - 1];
    expect(lastRow?.id, 'the late row is sealed after rows with higher ids').to.equal(lateId);
    expect(rows.filter((r) => r.id > lateId)).to.have.length.at.least(5);
    let prev: Buffer = Buffer.alloc(32);
    for (const r of rows) {
      expect(r.prev_hash.equals(prev), `row ${r.seq}'s previous hash`).to.equal(true);
      expect(r.hash.equals(createHash('sha256').update(prev).update(byHand(r)).digest()), `row ${r.seq}'s hash`).to.equal(true);
      prev = r.hash;
    }
    expect(await sealAuditLog(own.db)).to.equal(0);
    expect(await readChain(own.db, jwks)).to.deep.include({ ok: true, rows: rows.length });
  });

  describe('finding the rows to seal by transaction id', () => {
    const entry = (requestId: string) => ({
      organisation_id: null,
      project_id: null,
      actor: 'operator',
      action: 'test.xid',
      target: null,
      status: 200,
      request_id: requestId,
      details: {},
    });
    const xidOf = async (tx: Knex) => BigInt((await tx.raw<{ rows: Array<{ x: string }> }>('SELECT pg_current_xact_id()::text AS x')).rows[0]?.x ?? '0');
    const sealedAt = async (requestId: string) =>
      (
        await own.db.raw<{ rows: Array<{ seq: number; xid: string }> }>(
          'SELECT c.seq, a.xid::text AS xid FROM audit_log a JOIN audit_chain c ON c.audit_id = a.id WHERE a.request_id = ?',
          [requestId],
        )
      ).rows[0];

    it('a transaction that took its id before a pass and writes and commits after it: the floor stays at or below it, a later pass seals its row', async () => {
      const open = await own.db.transaction();
      const xid = await xidOf(open);
      await direct(own.db, 3);
      expect(await sealAuditLog(own.db)).to.equal(3);
      expect((await floorOf(own.db)) <= xid).to.equal(true, 'the floor is at or below the open transaction');
      // Its row, written after that pass, carries the transaction's id: at or above the floor.
      await recordAudit(open, entry('xid-early'));
      expect(await sealAuditLog(own.db)).to.equal(0);
      await open.commit();
      expect(await sealAuditLog(own.db)).to.equal(1);
      const sealed = await sealedAt('xid-early');
      expect(sealed?.seq).to.equal(await chainSize(own.db));
      expect(BigInt(sealed?.xid ?? '0')).to.equal(xid);
      await until('the floor to pass it', async () => (await sealAuditLog(own.db)) === 0 && (await floorOf(own.db)) > xid, 10_000);
      expect(await readChain(own.db, jwks)).to.deep.include({ ok: true });
    });

    it('a rolled-back insert leaves no hole: the floor moves past it and later rows are sealed', async () => {
      const aborted = await own.db.transaction();
      await recordAudit(aborted, entry('xid-aborted'));
      const xid = await xidOf(aborted);
      await direct(own.db, 2);
      expect(await sealAuditLog(own.db)).to.equal(2);
      expect((await floorOf(own.db)) <= xid).to.equal(true, 'the floor is at or below the open transaction');
      await aborted.rollback();
      await direct(own.db, 1);
      expect(await sealAuditLog(own.db)).to.equal(1);
      await until('the floor to pass the rolled-back transaction', async () => (await sealAuditLog(own.db)) === 0 && (await floorOf(own.db)) > xid, 10_000);
      expect(await sealedAt('xid-aborted')).to.equal(undefined);
      expect(await unsealedCount(own.db)).to.equal(0);
    });

    it('a backlog larger than a batch is sealed batch by batch in id order, and a row committed late below the batches is found', async () => {
      const late = await own.db.transaction();
      await recordAudit(late, entry('xid-late'));
      await direct(own.db, 7);
      const before = await chainSize(own.db);
      expect(await sealAuditLog(own.db, 3)).to.equal(7);
      const ids = (await own.db('audit_chain').where('seq', '>', before).orderBy('seq').select<Array<{ audit_id: number }>>('audit_id')).map((r) => r.audit_id);
      expect(ids).to.deep.equal([...ids].sort((x, y) => x - y));
      await late.commit();
      expect(await sealAuditLog(own.db, 3)).to.equal(1);
      expect((await sealedAt('xid-late'))?.seq).to.equal(before + 8);
      expect(await readChain(own.db, jwks)).to.deep.include({ ok: true, rows: before + 8 });
    });
  });

  it('the worker seals within its interval; at its interval it signs a checkpoint { size, head, time } with the service key', async () => {
    const worker = await startApp({ AUDIT_SEAL_INTERVAL_MS: '50', AUDIT_CHECKPOINT_INTERVAL_MS: '200' }, own.db, { relay: true });
    try {
      await direct(own.db, 3);
      await until('the worker to seal the rows', async () => (await unsealedCount(own.db)) === 0, 5_000);
      const checkpoint = await until('a checkpoint of the whole chain', async () => {
        const head = await chainSize(own.db);
        return (await own.db('audit_checkpoints').where('size', head).first()) as
          { size: number; head: Buffer; at: Date; jws: string; kid: string } | undefined;
      });
      const { payload, protectedHeader } = await compactVerify(checkpoint.jws, createLocalJWKSet(jwks), { algorithms: ['ES256'] });
      expect(protectedHeader).to.deep.include({ typ: 'custody-audit-checkpoint+jwt', kid: checkpoint.kid });
      const headRow = (await own.db<{ hash: Buffer }>('audit_chain').where('seq', checkpoint.size).first('hash')) ?? { hash: Buffer.alloc(0) };
      expect(JSON.parse(Buffer.from(payload).toString('utf8'))).to.deep.equal({
        size: checkpoint.size,
        head: headRow.hash.toString('hex'),
        time: checkpoint.at.toISOString(),
      });
    } finally {
      await worker.close();
    }
    // Nothing new: no new checkpoint.
    expect(await checkpointAuditLog(own.db, signer, Date.now)).to.equal(0);
  });

  it("the console's chain status: the organisation's newest rows and the checkpoints whose heads are among them, no other tenant's; a changed row shows", async () => {
    const t = await createTenant(app.client);
    await direct(own.db, 3, t.org.id);
    await sealAuditLog(own.db);
    // The chain's end is the organisation's own row: the checkpoint over it is one to check.
    const size = await checkpointAuditLog(own.db, signer, Date.now);
    const ownRows = Number((await own.db('audit_chain').where({ organisation_id: t.org.id }).count<Array<{ count: string }>>('* as count'))[0]?.count);
    const res = await app.client.get(`/api/v1/organisations/${t.org.id}/audit/verification`);
    expect(res.status, res.text).to.equal(200);
    expect(res.body).to.deep.include({ ok: true, rows: ownRows, checkpoints: 1, after: 0, unsealed: 0 });
    expect(res.body.lastCheckpoint?.size).to.equal(size);
    // Another organisation's status checks none of these checkpoints: none has its head among its rows.
    await direct(own.db, 2);
    await sealAuditLog(own.db);
    await checkpointAuditLog(own.db, signer, Date.now);
    const other = await createTenant(app.client);
    await sealAuditLog(own.db);
    const theirs = await app.client.get(`/api/v1/organisations/${other.org.id}/audit/verification`);
    expect(theirs.body).to.deep.include({ ok: true, checkpoints: 0 });
    // A row of the organisation changed after it was sealed: the status names it.
    const tx = await own.db.transaction();
    try {
      const seq = (await tx('audit_chain').where({ organisation_id: t.org.id }).orderBy('seq', 'desc').first<{ seq: number }>('seq'))?.seq ?? 0;
      await tx.raw(`UPDATE audit_log SET target = 'changed' WHERE ${ROW_AT}`, [seq]);
      const report = await verifyRecent(tx, t.org.id, jwks);
      expect(report.ok).to.equal(false);
      expect(report.problem).to.deep.include({ seq, kind: 'changed' });
    } finally {
      await tx.rollback();
    }
  });

  describe('tampering in SQL is detected and located', () => {
    before(async () => {
      chain.early = await chainSize(own.db);
      // A checkpoint of the chain as it is (rows were sealed since the worker's, by the suites above).
      await checkpointAuditLog(own.db, signer, Date.now);
      await direct(own.db, 12);
      await sealAuditLog(own.db);
      chain.size = await checkpointAuditLog(own.db, signer, Date.now);
      expect(chain.size).to.equal(chain.early + 12);
      // Every sealed row below the floor (the cluster's other transactions may hold it back a moment).
      const newest = BigInt(
        (await own.db.raw<{ rows: Array<{ x: string }> }>('SELECT xid::text AS x FROM audit_log ORDER BY xid DESC LIMIT 1')).rows[0]?.x ?? '0',
      );
      await until('the floor to pass every sealed row', async () => (await sealAuditLog(own.db)) === 0 && (await floorOf(own.db)) > newest, 10_000);
      expect(await own.db('audit_checkpoints').where('size', chain.early).first()).to.not.equal(undefined);
    });

    /** Runs `tamper` in a transaction, verifies the chain as that transaction sees it, and rolls it back. */
    async function tampered(tamper: (tx: Knex.Transaction) => Promise<unknown>): Promise<VerifyReport> {
      const tx = await own.db.transaction();
      try {
        await tamper(tx);
        return await readChain(tx, jwks);
      } finally {
        await tx.rollback();
      }
    }
    const k = () => chain.early + 4;

    it('verifies the untouched chain and its checkpoints', async () => {
      const checkpoints = Number((await own.db('audit_checkpoints').count<Array<{ count: number }>>('* as count'))[0]?.count);
      expect(checkpoints).to.be.at.least(2);
      expect(await readChain(own.db, jwks)).to.deep.equal({ ok: true, rows: chain.size, checkpoints, lastSeq: chain.size });
    });

    it('a changed row', async () => {
      const report = await tampered((tx) => tx.raw(`UPDATE audit_log SET actor = ? WHERE ${ROW_AT}`, ['token:1', k()]));
      expect(report.problem).to.deep.include({ seq: k(), kind: 'changed' });
      const at = await tampered((tx) => tx.raw(`UPDATE audit_log SET at = at + interval '1 microsecond' WHERE ${ROW_AT}`, [k() + 1]));
      expect(at.problem).to.deep.include({ seq: k() + 1, kind: 'changed' });
    });

    it("a chain entry changed: its hash, its previous hash, the audit row it names, its organisation's copy", async () => {
      const hash = await tampered((tx) => tx.raw('UPDATE audit_chain SET hash = ? WHERE seq = ?', [Buffer.alloc(32, 7), k()]));
      expect(hash.problem).to.deep.include({ seq: k(), kind: 'changed' });
      const prev = await tampered((tx) => tx.raw('UPDATE audit_chain SET prev_hash = ? WHERE seq = ?', [Buffer.alloc(32, 7), k()]));
      expect(prev.problem).to.deep.include({ seq: k(), kind: 'broken_link' });
      // Two entries trade their audit rows: each hash covers its row's id and content.
      const swapped = await tampered(async (tx) => {
        const [first = 0, second = 0] = (
          await tx('audit_chain')
            .whereIn('seq', [k(), k() + 1])
            .orderBy('seq')
            .select<Array<{ audit_id: number }>>('audit_id')
        ).map((r) => r.audit_id);
        await tx.raw('UPDATE audit_chain SET audit_id = -audit_id WHERE seq IN (?, ?)', [k(), k() + 1]);
        await tx.raw('UPDATE audit_chain SET audit_id = ? WHERE seq = ?', [second, k()]);
        await tx.raw('UPDATE audit_chain SET audit_id = ? WHERE seq = ?', [first, k() + 1]);
      });
      expect(swapped.problem).to.deep.include({ seq: k(), kind: 'changed' });
      // The copy an organisation's export is found by: refiled under another organisation.
      const filed = await tampered((tx) => tx.raw('UPDATE audit_chain SET organisation_id = 424242 WHERE seq = ?', [k()]));
      expect(filed.problem).to.deep.include({ seq: k(), kind: 'changed' });
      expect(filed.problem?.message).to.include('filed under another organisation');
      // That organisation's export does not show the row: its own organisation is checked too.
      const tx = await own.db.transaction();
      try {
        const seq = k();
        const organisationId = (await tx.raw<{ rows: Array<{ o: number | null }> }>(`SELECT organisation_id AS o FROM audit_log WHERE ${ROW_AT}`, [seq]))
          .rows[0]?.o;
        await tx('audit_chain').where('seq', seq).update({ organisation_id: 424242 });
        expect(await sealedRows(tx, { organisationId: 424242, after: 0, limit: 10 })).to.deep.equal([]);
        expect(organisationId).to.not.equal(424242);
      } finally {
        await tx.rollback();
      }
    });

    it('a deleted row', async () => {
      // The audit row: its chain entry names a row that is gone.
      const row = await tampered((tx) => tx.raw(`DELETE FROM audit_log WHERE ${ROW_AT}`, [k()]));
      expect(row.problem).to.deep.include({ seq: k(), kind: 'missing' });
      expect(row.problem?.message).to.include('which is gone');
      // The chain entry: a gap in the numbers.
      const entry = await tampered((tx) => tx.raw('DELETE FROM audit_chain WHERE seq = ?', [k()]));
      expect(entry.problem).to.deep.include({ seq: k(), kind: 'missing' });
      // Both.
      const both = await tampered(async (tx) => {
        await tx.raw(`DELETE FROM audit_log WHERE ${ROW_AT}`, [k()]);
        await tx.raw('DELETE FROM audit_chain WHERE seq = ?', [k()]);
      });
      expect(both.problem).to.deep.include({ seq: k(), kind: 'missing' });
    });

    it('an inserted row, even one hashed correctly onto the row before it', async () => {
      const insert = async (tx: Knex.Transaction, rehash: boolean) => {
        await tx.raw('UPDATE audit_chain SET seq = -seq WHERE seq >= ?', [k()]);
        await tx.raw('UPDATE audit_chain SET seq = 1 - seq WHERE seq < 0');
        const prev =
          (
            await tx<{ hash: Buffer }>('audit_chain')
              .where('seq', k() - 1)
              .first('hash')
          )?.hash ?? Buffer.alloc(32);
        const {
          rows: [row],
        } = await tx.raw<{ rows: Array<{ id: number }> }>(
          'INSERT INTO audit_log (actor, action, target, status, details) VALUES (?, ?, ?, ?, ?) RETURNING id',
          ['operator', 'DELETE /api/v1/organisations/:id', '1', 204, '{}'],
        );
        await tx('audit_chain').insert({ seq: k(), audit_id: row?.id, organisation_id: null, prev_hash: prev, hash: Buffer.alloc(32) });
        if (!rehash) return;
        const entry = (await tx.raw(`SELECT ${AT} FROM audit_log WHERE id = ?`, [row?.id ?? 0])).rows[0] as { at: string };
        const e: ChainEntry = {
          seq: k(),
          id: row?.id ?? 0,
          at: entry.at,
          organisationId: null,
          projectId: null,
          actor: 'operator',
          action: 'DELETE /api/v1/organisations/:id',
          target: '1',
          status: 204,
          requestId: null,
          details: {},
        };
        await tx('audit_chain')
          .where('audit_id', row?.id)
          .update({ hash: rowHash(prev, e) });
      };
      expect((await tampered((tx) => insert(tx, false))).problem).to.deep.include({ seq: k(), kind: 'changed' });
      // Hashed onto the row before it: the row after it no longer follows.
      expect((await tampered((tx) => insert(tx, true))).problem).to.deep.include({ seq: k() + 1, kind: 'broken_link' });
    });

    it('a row written behind the sealer (its transaction id below the floor, so never sealed): unchained', async () => {
      const report = await tampered(async (tx) => {
        await tx.raw(
          "INSERT INTO audit_log (actor, action, target, status, details, xid) VALUES ('operator', 'DELETE /api/v1/organisations/:id', '1', 204, '{}', '1')",
        );
        // The sealer passes it by: it looks from the floor on.
        expect(await sealAuditLog(tx)).to.equal(0);
      });
      expect(report.problem).to.deep.include({ seq: chain.size + 1, kind: 'unchained' });
    });

    it('two rows swapped', async () => {
      const report = await tampered(async (tx) => {
        await tx.raw('UPDATE audit_chain SET seq = -1 WHERE seq = ?', [k()]);
        await tx.raw('UPDATE audit_chain SET seq = ? WHERE seq = ?', [k(), k() + 1]);
        await tx.raw('UPDATE audit_chain SET seq = ? WHERE seq = -1', [k() + 1]);
      });
      expect(report.problem).to.deep.include({ seq: k(), kind: 'broken_link' });
    });

    it('the tail cut off (a signed checkpoint covers it)', async () => {
      const report = await tampered(async (tx) => {
        await tx.raw('DELETE FROM audit_log WHERE id IN (SELECT audit_id FROM audit_chain WHERE seq > ?)', [k()]);
        await tx.raw('DELETE FROM audit_chain WHERE seq > ?', [k()]);
      });
      expect(report.problem).to.deep.include({ seq: k() + 1, kind: 'truncated' });
      expect(report.problem?.message).to.include(`rows ${k() + 1} to ${chain.size} are missing`);
      // The chain entries alone.
      const entries = await tampered((tx) => tx.raw('DELETE FROM audit_chain WHERE seq > ?', [k()]));
      expect(entries.problem).to.deep.include({ seq: k() + 1, kind: 'truncated' });
      // The audit rows alone: their entries name rows that are gone.
      const rows = await tampered((tx) => tx.raw('DELETE FROM audit_log WHERE id IN (SELECT audit_id FROM audit_chain WHERE seq > ?)', [k()]));
      expect(rows.problem).to.deep.include({ seq: k() + 1, kind: 'missing' });
    });

    it('the chain entries of the tail cut off with the checkpoints that cover them: their rows are left unchained', async () => {
      const report = await tampered(async (tx) => {
        await tx.raw('DELETE FROM audit_chain WHERE seq > ?', [k()]);
        await tx.raw('DELETE FROM audit_checkpoints WHERE size > ?', [k()]);
      });
      expect(report.problem).to.deep.include({ seq: k() + 1, kind: 'unchained' });
    });

    it('a row changed and every hash after it recomputed: the signed checkpoint no longer matches (located between two checkpoints)', async () => {
      const report = await tampered(async (tx) => {
        await tx.raw(`UPDATE audit_log SET actor = ? WHERE ${ROW_AT}`, ['token:1', k()]);
        const rows = (await tx.raw(`${CHAINED} WHERE c.seq >= ? ORDER BY c.seq`, [k()])).rows as Array<Parameters<typeof byHand>[0] & { prev_hash: Buffer }>;
        let prev: Buffer = rows[0]?.prev_hash ?? Buffer.alloc(32);
        for (const r of rows) {
          const hash = rowHash(prev, entryOf(r, r.seq));
          await tx('audit_chain').where('seq', r.seq).update({ prev_hash: prev, hash });
          prev = hash;
        }
      });
      expect(report.problem).to.deep.include({ seq: chain.size, kind: 'checkpoint_mismatch' });
      expect(report.problem?.message).to.include(`after the checkpoint of size ${chain.early}`);
    });

    it('a checkpoint rewritten without the service key', async () => {
      const report = await tampered((tx) =>
        tx('audit_checkpoints')
          .where('size', chain.size)
          .update({ head: Buffer.alloc(32, 1) }),
      );
      expect(report.problem).to.deep.include({ seq: chain.size, kind: 'checkpoint_signature' });
    });

    it('`custody audit verify` against the database names the first row that does not match (exit 1), and passes the untouched chain (exit 0)', async () => {
      const jwksArg = ['--jwks', `${app.url}/.well-known/jwks.json`];
      const clean = await custody(['audit', 'verify', ...jwksArg, '--json'], cliEnv);
      expect(clean.code, clean.stderr).to.equal(0);
      expect(JSON.parse(clean.stdout)).to.deep.include({ ok: true, rows: chain.size, lastSeq: chain.size });
      const id = (await own.db<{ audit_id: number }>('audit_chain').where('seq', k()).first('audit_id'))?.audit_id ?? 0;
      const original = (await own.db<{ details: unknown }>('audit_log').where('id', id).first('details')) ?? { details: {} };
      await own
        .db('audit_log')
        .where('id', id)
        .update({ details: JSON.stringify({ params: { id: '999' } }) });
      try {
        const bad = await custody(['audit', 'verify', ...jwksArg], cliEnv);
        expect(bad.code).to.equal(1);
        expect(bad.stdout).to.match(new RegExp(`firstMismatch\\s+${k()}`));
        expect(bad.stderr).to.include(`row ${k()}`);
      } finally {
        await own
          .db('audit_log')
          .where('id', id)
          .update({ details: JSON.stringify(original.details) });
      }
      expect((await custody(['audit', 'verify', ...jwksArg], cliEnv)).code).to.equal(0);
    });
  });

  describe('export', () => {
    let tenants: Array<Awaited<ReturnType<typeof createTenant>>>;
    before(async () => {
      tenants = [await createTenant(app.client), await createTenant(app.client)];
      for (const t of tenants)
        for (let i = 0; i < 3; i++) expect((await t.orgAdmin.put(`/api/v1/organisations/${t.org.id}`, { name: `renamed ${i}` })).status).to.equal(200);
      await sealAuditLog(own.db);
      await checkpointAuditLog(own.db, signer, Date.now);
    });

    const lines = (text: string) =>
      text
        .trimEnd()
        .split('\n')
        .map((l) => JSON.parse(l) as { type: string } & Record<string, unknown>);
    const exportOf = (id: number, token: string, query = '') =>
      fetch(`${app.url}/api/v1/organisations/${id}/audit/export${query}`, { headers: { authorization: `Bearer ${token}` } });

    it("streams one organisation's sealed rows in chain order as NDJSON with their chain fields and the checkpoints; resumable from a sequence number", async () => {
      const [a] = tenants;
      if (!a) throw new Error('no tenant');
      const res = await exportOf(a.org.id, a.tokens.orgAdmin.token);
      expect(res.status).to.equal(200);
      expect(res.headers.get('content-type')).to.match(/^application\/x-ndjson/);
      const all = lines(await res.text());
      expect(all[0]).to.deep.equal({ type: 'export', organisationId: a.org.id, after: 0 });
      const entries = all.filter((l) => l.type === 'entry') as unknown as Array<SealedEntry & { type: string }>;
      const inDb = await own.db<{ seq: number; organisation_id: number }>('audit_chain').where('organisation_id', a.org.id).orderBy('seq').select('seq');
      expect(entries.map((e) => e.seq)).to.deep.equal(inDb.map((r) => r.seq));
      expect(entries.length).to.be.at.least(4);
      for (const e of entries) {
        expect(e.organisationId).to.equal(a.org.id);
        const { prevHash, hash, ...rest } = e;
        const entry: ChainEntry = rest;
        expect(rowHash(Buffer.from(prevHash, 'hex'), entry).toString('hex')).to.equal(hash);
      }
      expect(all.filter((l) => l.type === 'checkpoint').length).to.be.at.least(1);
      expect(all[all.length - 1]).to.deep.equal({ type: 'end', lastSeq: entries[entries.length - 1]?.seq, more: false });

      const page = lines(await (await exportOf(a.org.id, a.tokens.orgAdmin.token, '?limit=2')).text());
      const end = page[page.length - 1] as unknown as { lastSeq: number; more: boolean };
      expect(page.filter((l) => l.type === 'entry').map((l) => l['seq'])).to.deep.equal(entries.slice(0, 2).map((e) => e.seq));
      expect(end).to.deep.include({ more: true, lastSeq: entries[1]?.seq });
      const rest = lines(await (await exportOf(a.org.id, a.tokens.orgAdmin.token, `?after=${end.lastSeq}`)).text());
      expect(rest.filter((l) => l.type === 'entry').map((l) => l['seq'])).to.deep.equal(entries.slice(2).map((e) => e.seq));
    });

    it('is refused to another tenant (404), to a read token (403), and for a bad sequence number (400) without a 500', async () => {
      const [a, b] = tenants;
      if (!a || !b) throw new Error('no tenants');
      expect((await exportOf(a.org.id, b.tokens.orgAdmin.token)).status).to.equal(404);
      expect((await exportOf(a.org.id, a.tokens.orgRead.token)).status).to.equal(403);
      for (const q of ['?after=x', '?after=-1', '?limit=0', '?limit=99999999', '?other=1']) {
        const res = await exportOf(a.org.id, a.tokens.orgAdmin.token, q);
        expect(res.status, q).to.equal(400);
        expect(res.headers.get('content-type')).to.match(/problem\+json/);
      }
    });

    it('`custody audit export` writes it; `custody audit verify --file` checks it, and names the row an edited file changed', async () => {
      const [a] = tenants;
      if (!a) throw new Error('no tenant');
      const file = path.join(dir, 'org.ndjson');
      const exported = await custody(['audit', 'export', '--organisation', String(a.org.id), '--limit', '2', '--out', file], cliEnv);
      expect(exported.code, exported.stderr).to.equal(0);
      const jwksFile = ['--jwks', path.join(dir, 'jwks.json'), '--json'];
      const ok = await custody(['audit', 'verify', '--file', file, ...jwksFile], cliEnv);
      expect(ok.code, ok.stderr).to.equal(0);
      const entries = readFileSync(file, 'utf8')
        .split('\n')
        .filter((l) => l.startsWith('{"type":"entry"'));
      expect(JSON.parse(ok.stdout)).to.deep.include({ ok: true, rows: entries.length, organisationId: a.org.id });
      const second = JSON.parse(entries[1] ?? '{}') as SealedEntry;
      writeFileSync(file, readFileSync(file, 'utf8').replace(entries[1] ?? '', JSON.stringify({ type: 'entry', ...second, target: 'someone else' })));
      const bad = await custody(['audit', 'verify', '--file', file, ...jwksFile], cliEnv);
      expect(bad.code).to.equal(1);
      expect(JSON.parse(bad.stdout)).to.deep.include({ ok: false, firstMismatch: second.seq, kind: 'changed' });

      // The whole chain, from the database: verified as one contiguous chain; a line taken out is found.
      const full = path.join(dir, 'full.ndjson');
      expect((await custody(['audit', 'export', '--database', '--out', full], cliEnv)).code).to.equal(0);
      const size = await chainSize(own.db);
      expect(JSON.parse((await custody(['audit', 'verify', '--file', full, ...jwksFile], cliEnv)).stdout)).to.deep.include({
        ok: true,
        rows: size,
        organisationId: null,
      });
      const text = readFileSync(full, 'utf8').split('\n');
      const cut = text.findIndex((l) => l.startsWith('{"type":"entry","seq":5,'));
      writeFileSync(full, [...text.slice(0, cut), ...text.slice(cut + 1)].join('\n'));
      const missing = await custody(['audit', 'verify', '--file', full, ...jwksFile], cliEnv);
      expect(missing.code).to.equal(1);
      expect(JSON.parse(missing.stdout)).to.deep.include({ firstMismatch: 5, kind: 'missing' });
    });
  });

  it('the migration to an insert-only chain moves a chain sealed on audit_log into audit_chain unchanged (it verifies the same), seals what was left, and goes back down', async () => {
    const earlier = await ownDatabase(`custody_chain_mig_${Date.now()}_${process.pid}`);
    try {
      await migrateTo(earlier.db, '20261127000000_audit_chain.js');
      await direct(earlier.db, 5, 7);
      // Sealed as the earlier release did: the chain fields on the row.
      let prev: Buffer = Buffer.alloc(32);
      const rows = (
        await earlier.db.raw(`SELECT id, ${AT}, organisation_id, project_id, actor, action, target, status, request_id, details FROM audit_log ORDER BY id`)
      ).rows as Array<Omit<Parameters<typeof byHand>[0], 'seq'>>;
      for (const [i, r] of rows.slice(0, 3).entries()) {
        const hash = rowHash(prev, entryOf(r, i + 1));
        await earlier
          .db('audit_log')
          .where('id', r.id)
          .update({ seq: i + 1, prev_hash: prev, hash });
        prev = hash;
      }
      const old = await earlier
        .db('audit_log')
        .whereNotNull('seq')
        .orderBy('seq')
        .select<Array<{ seq: number; id: number; prev_hash: Buffer; hash: Buffer }>>('seq', 'id', 'prev_hash', 'hash');

      await migrateLatest(earlier.db);
      const moved = await earlier
        .db('audit_chain')
        .orderBy('seq')
        .select<Array<{ seq: number; audit_id: number; organisation_id: number; prev_hash: Buffer; hash: Buffer }>>('*');
      expect(moved.map((m) => ({ seq: m.seq, id: m.audit_id, prev_hash: m.prev_hash, hash: m.hash }))).to.deep.equal(old);
      expect(moved.every((m) => m.organisation_id === 7)).to.equal(true);
      expect(await readChain(earlier.db, { keys: [] })).to.deep.equal({ ok: true, rows: 3, checkpoints: 0, lastSeq: 3 });
      // The two rows left unsealed are found from the floor and sealed after the others.
      expect(await sealAuditLog(earlier.db)).to.equal(2);
      expect(await readChain(earlier.db, { keys: [] })).to.deep.equal({ ok: true, rows: 5, checkpoints: 0, lastSeq: 5 });
      const chained = await earlier
        .db('audit_chain')
        .orderBy('seq')
        .select<Array<{ seq: number; audit_id: number; prev_hash: Buffer; hash: Buffer }>>('seq', 'audit_id', 'prev_hash', 'hash');

      await earlier.db.transaction((tx) => insertOnly.down(tx));
      const back = await earlier
        .db('audit_log')
        .orderBy('seq')
        .select<Array<{ seq: number; id: number; prev_hash: Buffer; hash: Buffer }>>('seq', 'id', 'prev_hash', 'hash');
      expect(back).to.deep.equal(chained.map((c) => ({ seq: c.seq, id: c.audit_id, prev_hash: c.prev_hash, hash: c.hash })));
      expect(await earlier.db.schema.hasTable('audit_chain')).to.equal(false);
      expect(await earlier.db.schema.hasColumn('audit_log', 'xid')).to.equal(false);
    } finally {
      await earlier.drop();
    }
  });
});
