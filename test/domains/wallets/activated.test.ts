import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { ActivatedWallets } from '../../../src/domains/wallets/activated.js';
import { testDb } from '../../support/db.js';

describe('activated wallets kept by the API process (domains/wallets/activated.ts)', () => {
  it('keeps activated wallets only, answers for their own project only, and drops the least recently used beyond its bound', async () => {
    const db = testDb();
    const [org] = await db('organisations')
      .insert({ name: `activated ${Date.now()}` })
      .returning<Array<{ id: number }>>('id');
    const projects = await db('projects')
      .insert(
        [1, 2].map(() => ({ organisation_id: org?.id, name: 'p', environment: 'testnet', issuer: 'https://idp.example.com', wallet_webhook_secret_enc: 'x' })),
      )
      .returning<Array<{ id: number }>>('id');
    const [projectId = 0, otherProjectId = 0] = projects.map((p) => p.id);
    const wallets = await db('wallets')
      .insert([0, 1, 2].map((i) => ({ project_id: projectId, email: `a${i}@example.com`, email_lower: `a${i}@example.com` })))
      .returning<Array<{ id: number }>>('id');
    const [a = 0, b = 0, c = 0] = wallets.map((w) => w.id);
    const activate = (id: number) =>
      db('wallets')
        .where({ id })
        .update({ address: `0x${randomBytes(20).toString('hex')}`, activated_at: db.fn.now() });

    const kept = new ActivatedWallets(2);
    // Pending (no key yet): not found, not kept; once activated, found.
    expect(await kept.find(db, projectId, a)).to.equal(undefined);
    expect(kept.size).to.equal(0);
    await activate(a);
    expect((await kept.find(db, projectId, a))?.address).to.match(/^0x[0-9a-f]{40}$/);
    // Another project's wallet is not found, kept or not.
    expect(await kept.find(db, otherProjectId, a)).to.equal(undefined);

    await activate(b);
    await activate(c);
    await kept.find(db, projectId, b);
    await kept.find(db, projectId, a); // a is now the most recently used
    await kept.find(db, projectId, c); // over the bound of two: b goes
    expect(kept.size).to.equal(2);
    // Rows the database no longer has show what is answered from memory (nothing deletes a wallet in the service).
    await db('wallets').whereIn('id', [a, b, c]).delete();
    expect((await kept.find(db, projectId, a))?.id).to.equal(a);
    expect((await kept.find(db, projectId, c))?.id).to.equal(c);
    expect(await kept.find(db, projectId, b)).to.equal(undefined);
  });
});
