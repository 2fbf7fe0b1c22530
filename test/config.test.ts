import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { ConfigError, loadConfig } from '../src/config.js';

const problemsOf = (env: Record<string, string>): string[] => {
  try {
    loadConfig(env);
  } catch (err) {
    if (err instanceof ConfigError) return err.problems;
    throw err;
  }
  return [];
};

describe('config (section 12)', () => {
  it('has working defaults for local use and no default for any secret', () => {
    const c = loadConfig({});
    expect(c).to.include({ role: 'all', port: 8080, appEnv: 'testnet', serviceAudience: 'urn:custody:testnet', logLevel: 'info' });
    expect(c.databaseUrl).to.equal(undefined);
    expect(c.operatorToken).to.equal(undefined);
    expect(c.dataEncryptionKey).to.equal(undefined);
    expect(c.dataDir).to.equal(path.resolve('.data'));
    expect(c.embeddedPgPort).not.to.equal(5432);
    expect(Object.isFrozen(c)).to.equal(true);
  });

  it('requires every secret in production and lists all problems at once', () => {
    const problems = problemsOf({ APP_ENV: 'production' });
    expect(problems.join('\n')).to.include('DATABASE_URL').and.include('SERVICE_AUDIENCE').and.include('OPERATOR_TOKEN').and.include('DATA_ENCRYPTION_KEY');
    expect(problems).to.have.length(4);
  });

  it('validates values', () => {
    const problems = problemsOf({
      ROLE: 'web',
      APP_ENV: 'staging',
      PORT: '70000',
      DATABASE_URL: 'mysql://x',
      OPERATOR_TOKEN: 'short',
      DATA_ENCRYPTION_KEY: Buffer.alloc(16).toString('base64'),
      EMBEDDED_PG_PORT: '5432',
      SHUTDOWN_TIMEOUT_MS: '-1',
    });
    expect(problems).to.have.length(8);
  });

  it('asks each role in production only for what it uses', () => {
    const db = { APP_ENV: 'production', DATABASE_URL: 'postgres://db/custody' };
    expect(problemsOf({ ...db, ROLE: 'migrate' })).to.deep.equal([]);
    const worker = problemsOf({ ...db, ROLE: 'worker', KEYVAULT_URL: 'https://signer:8300', KEYVAULT_TOKEN: 'k'.repeat(40) });
    expect(worker).to.have.length(1);
    expect(worker[0]).to.include('DATA_ENCRYPTION_KEY');
    const api = problemsOf({ ...db, ROLE: 'api', KEYVAULT_URL: 'https://signer:8300', KEYVAULT_TOKEN: 'k'.repeat(40) }).join('\n');
    for (const name of ['SERVICE_AUDIENCE', 'OPERATOR_TOKEN', 'DATA_ENCRYPTION_KEY']) expect(api).to.include(name);
  });

  it('requires DATABASE_URL for ROLE=api and ROLE=worker', () => {
    expect(problemsOf({ ROLE: 'api' })[0]).to.include('DATABASE_URL is required for ROLE=api');
    expect(problemsOf({ ROLE: 'worker' })[0]).to.include('DATABASE_URL is required for ROLE=worker');
    expect(problemsOf({ ROLE: 'migrate' })).to.deep.equal([]);
  });

  it('reads *_FILE variants, refuses both forms at once and reports unreadable files', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'cfg-'));
    try {
      const key = Buffer.alloc(32, 1).toString('base64');
      writeFileSync(path.join(dir, 'dek'), `${key}\n`);
      writeFileSync(path.join(dir, 'op'), 'o'.repeat(40));
      const c = loadConfig({ DATA_ENCRYPTION_KEY_FILE: path.join(dir, 'dek'), OPERATOR_TOKEN_FILE: path.join(dir, 'op') });
      expect(c.dataEncryptionKey?.equals(Buffer.alloc(32, 1))).to.equal(true);
      expect(c.operatorToken).to.equal('o'.repeat(40));
      expect(problemsOf({ OPERATOR_TOKEN: 'o'.repeat(40), OPERATOR_TOKEN_FILE: path.join(dir, 'op') })[0]).to.include('both set');
      expect(problemsOf({ DATABASE_URL_FILE: path.join(dir, 'missing') })[0]).to.include('cannot read');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('never puts a secret into a problem message', () => {
    const secret = 'not-a-valid-key-but-secret-material';
    const problems = problemsOf({ DATA_ENCRYPTION_KEY: secret, OPERATOR_TOKEN: 'tiny secret' });
    expect(problems.join('\n')).not.to.include(secret);
    expect(problems.join('\n')).not.to.include('tiny secret');
  });
});
