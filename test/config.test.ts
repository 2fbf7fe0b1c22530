import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { ConfigError, loadConfig, ROLE_NEEDS, ROLES, roleOf, type RoleNeeds } from '../src/platform/config/config.js';

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

  it('asks each role in production for exactly what ROLE_NEEDS says it uses, and reads nothing else', () => {
    /** The settings a role's needs call for, in production. */
    const required = (needs: RoleNeeds): Record<string, string> => ({
      ...(needs.database !== 'none' ? { DATABASE_URL: 'postgres://db/custody' } : {}),
      ...(needs.api ? { SERVICE_AUDIENCE: 'urn:custody', OPERATOR_TOKEN: 'o'.repeat(40) } : {}),
      ...(needs.dataKey ? { DATA_ENCRYPTION_KEY: Buffer.alloc(32, 7).toString('base64') } : {}),
      ...(needs.signer === 'remote' ? { KEYVAULT_URL: 'https://signer:8300', KEYVAULT_TOKEN: 'k'.repeat(40) } : {}),
    });
    // Files nobody can read: a role that reads a setting it does not use reports it.
    const unreadable = (name: string) => ({ [`${name}_FILE`]: '/nonexistent/custody-config-test' });
    const secretNames = ['DATABASE_URL', 'OPERATOR_TOKEN', 'DATA_ENCRYPTION_KEY', 'KEYVAULT_TOKEN'];
    for (const role of ROLES.filter((r) => r !== 'keyvault')) {
      const needs = ROLE_NEEDS[role];
      const env = { APP_ENV: 'production', ROLE: role, ...required(needs) };
      expect(problemsOf(env), role).to.deep.equal([]);
      for (const name of Object.keys(required(needs))) {
        const without: Record<string, string> = { ...env };
        delete without[name];
        const problems = problemsOf(without);
        expect(problems, `${role} without ${name}`).to.have.length(1);
        expect(problems[0], `${role} without ${name}`).to.include(name);
      }
      for (const name of secretNames.filter((n) => !(n in env))) {
        expect(problemsOf({ ...env, ...unreadable(name) }), `${role} reads ${name}_FILE`).to.deep.equal([]);
      }
    }
    // Every problem of a role at once, in one message.
    const none = problemsOf({ APP_ENV: 'production', ROLE: 'api' });
    for (const name of Object.keys(required(ROLE_NEEDS.api))) expect(none.join('\n'), name).to.include(name);
  });

  it("leaves ROLE=keyvault to the signer's own configuration", () => {
    expect(ROLE_NEEDS.keyvault).to.deep.equal({ database: 'none', api: false, dataKey: false, signer: 'none' });
    expect(roleOf({ ROLE: 'keyvault' })).to.equal('keyvault');
    expect(roleOf({})).to.equal('all');
    expect(() => roleOf({ ROLE: 'signer' })).to.throw(ConfigError, 'ROLE must be one of');
    // main.ts dispatches before this loader: reading it for the signer is a mistake, said so.
    expect(problemsOf({ ROLE: 'keyvault', APP_ENV: 'production' })[0]).to.include("signer's own configuration");
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

  it('reads DATA_DECRYPTION_KEYS as a comma-separated list of keys that only open values, refusing repeats and bad keys without echoing them', () => {
    const k = (n: number) => Buffer.alloc(32, n).toString('base64');
    const c = loadConfig({ DATA_ENCRYPTION_KEY: k(1), DATA_DECRYPTION_KEYS: `${k(2)}, ${k(3)}` });
    expect(c.dataDecryptionKeys.map((b) => b[0])).to.deep.equal([2, 3]);
    expect(loadConfig({ DATA_ENCRYPTION_KEY: k(1) }).dataDecryptionKeys).to.deep.equal([]);
    expect(problemsOf({ DATA_ENCRYPTION_KEY: k(1), DATA_DECRYPTION_KEYS: k(1) })[0]).to.include('DATA_ENCRYPTION_KEY itself');
    expect(problemsOf({ DATA_ENCRYPTION_KEY: k(1), DATA_DECRYPTION_KEYS: `${k(2)},${k(2)}` })[0]).to.include('twice');
    const bad = problemsOf({ DATA_ENCRYPTION_KEY: k(1), DATA_DECRYPTION_KEYS: 'secret-but-not-a-key' });
    expect(bad[0]).to.include('DATA_DECRYPTION_KEYS must be keys of 32 bytes');
    expect(bad.join('\n')).not.to.include('secret-but-not-a-key');
  });
});
