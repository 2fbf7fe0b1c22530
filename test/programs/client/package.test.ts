import { execFile } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { realpathSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { verifyMessage } from 'ethers';
import { recoverMessageAddress } from 'viem';
import { CustodyClient } from '../../../src/programs/client/index.js';
import { startAppWithIdp } from '../../support/app.js';
import { ROOT } from '../../support/examples.js';

/**
 * The client as its users get it: packages/client packed with `npm pack` (its prepack builds it),
 * installed from the tarball into a new Node project, imported from plain .mjs and from strict
 * TypeScript (the example of docs/examples/client), and used against a running service.
 */
const run = promisify(execFile);
const AUDIENCE = 'urn:custody:testnet';
const EXPECTED_FILES = [
  'README.md',
  'package.json',
  ...['eip1193', 'ethers', 'index', 'operations', 'types', 'viem', 'wire'].flatMap((f) => [`dist/${f}.d.ts`, `dist/${f}.js`]),
].sort();

/** Links a package of this checkout's node_modules into the project (no network, no copy). */
function link(project: string, name: string): void {
  const target = path.join(project, 'node_modules', name);
  mkdirSync(path.dirname(target), { recursive: true });
  symlinkSync(realpathSync(path.join(ROOT, 'node_modules', name)), target, 'dir');
}

describe('the client package (packages/client): packed, installed from the tarball, used against the service', function () {
  this.timeout(120_000);
  let env: Awaited<ReturnType<typeof startAppWithIdp>>;
  let dir: string;
  let project: string;
  let tarball: string;

  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'custody-client-package-'));
    const [packed, started] = await Promise.all([
      run('npm', ['pack', path.join(ROOT, 'packages/client'), '--pack-destination', dir, '--json'], { cwd: dir }),
      startAppWithIdp(),
    ]);
    env = started;
    const [info] = JSON.parse(packed.stdout) as Array<{ filename: string; files: Array<{ path: string }> }>;
    tarball = path.join(dir, info?.filename ?? '');
    expect(info?.files.map((f) => f.path).sort()).to.deep.equal(EXPECTED_FILES);
    project = path.join(dir, 'app');
    mkdirSync(project);
    writeFileSync(path.join(project, 'package.json'), JSON.stringify({ name: 'app', private: true, type: 'module' }));
    // The package has no dependencies: installing the tarball needs no registry.
    await run('npm', ['install', '--offline', '--no-audit', '--no-fund', tarball], { cwd: project });
    // The optional peers, and Node's types for the TypeScript check, from this checkout.
    for (const name of ['viem', 'ethers', '@types/node']) link(project, name);
  });
  after(async () => {
    await env.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('holds the built client and its own README and version, and its types refer to nothing outside it but viem and ethers', () => {
    const installed = path.join(project, 'node_modules/@custody/client');
    const manifest = JSON.parse(readFileSync(path.join(installed, 'package.json'), 'utf8')) as Record<string, unknown>;
    expect(manifest).to.include({ name: '@custody/client', type: 'module' });
    expect(manifest['version']).to.match(/^\d+\.\d+\.\d+/);
    expect(manifest['dependencies']).to.equal(undefined);
    expect(manifest['peerDependenciesMeta']).to.deep.equal({ ethers: { optional: true }, viem: { optional: true } });
    expect(readFileSync(path.join(installed, 'README.md'), 'utf8')).to.match(/^# @custody\/client/);
    const dist = path.join(installed, 'dist');
    for (const file of readdirSync(dist).filter((f) => f.endsWith('.d.ts') || f.endsWith('.js'))) {
      const text = readFileSync(path.join(dist, file), 'utf8');
      for (const [, spec = ''] of text.matchAll(/(?:from|import)\s*\(?\s*'([^']+)'/g)) {
        if (spec.startsWith('.'))
          expect(readdirSync(dist), `${file} imports ${spec}`).to.include(path.basename(spec).replace(/\.js$/, file.endsWith('.d.ts') ? '.d.ts' : '.js'));
        else expect(['viem', 'viem/accounts', 'ethers'], `${file} imports ${spec}`).to.include(spec);
      }
      expect(text, file).to.not.match(/domains\/|platform\/|typebox/);
    }
  });

  it('is imported from plain .mjs and signs through the service with the three adapters (viem, ethers, EIP-1193)', async () => {
    const { projectId, walletId, walletAddress, signerToken } = await tenant();
    writeFileSync(
      path.join(project, 'use.mjs'),
      `import { CustodyClient, CustodyApiError } from '@custody/client';
import { toViemAccount } from '@custody/client/viem';
import { CustodySigner } from '@custody/client/ethers';
import { toEip1193Provider } from '@custody/client/eip1193';
const client = new CustodyClient({ baseUrl: process.env.URL, token: process.env.TOKEN });
const wallet = { projectId: Number(process.env.PROJECT), walletId: Number(process.env.WALLET) };
const account = await toViemAccount(client, wallet);
const signer = await CustodySigner.create(client, wallet);
// No node is called: these methods are the service's.
const provider = toEip1193Provider(client, wallet, { chainId: 8453, rpcUrl: 'http://127.0.0.1:9' });
const [accountOf1193] = await provider.request({ method: 'eth_requestAccounts' });
const refused = await client.wallets.rpc(wallet, { method: 'personal_sign', params: { message: 'nope' } }).catch((e) => e);
console.log(JSON.stringify({
  address: account.address,
  viem: await account.signMessage({ message: 'Order 1 via viem' }),
  ethers: await signer.signMessage('Order 2 via ethers'),
  eip1193: { address: accountOf1193, signature: await provider.request({ method: 'personal_sign', params: ['Order 3 via EIP-1193', accountOf1193] }) },
  refused: refused instanceof CustodyApiError ? refused.problem.code : String(refused),
}));
`,
    );
    const out = await run(process.execPath, ['use.mjs'], {
      cwd: project,
      env: { ...process.env, URL: env.app.url, TOKEN: signerToken, PROJECT: String(projectId), WALLET: String(walletId) },
    });
    const result = JSON.parse(out.stdout) as {
      address: string;
      viem: `0x${string}`;
      ethers: `0x${string}`;
      eip1193: { address: string; signature: string };
      refused: string;
    };
    expect(result.address).to.equal(walletAddress);
    expect(verifyMessage('Order 1 via viem', result.viem)).to.equal(walletAddress);
    expect(await recoverMessageAddress({ message: 'Order 2 via ethers', signature: result.ethers })).to.equal(walletAddress);
    expect(result.eip1193.address).to.equal(walletAddress);
    expect(verifyMessage('Order 3 via EIP-1193', result.eip1193.signature)).to.equal(walletAddress);
    expect(result.refused).to.equal('policy_denied');
  });

  it('type-checks strict TypeScript against its own types (docs/examples/client compiled with tsc), and that example runs', async () => {
    const { projectId, projectKey, walletAddress, signerToken, userJwt } = await tenant();
    copyFileSync(path.join(ROOT, 'docs/examples/client/sign-in-and-sign.ts'), path.join(project, 'sign-in-and-sign.ts'));
    // The types are the real ones, not `any`: each line below must be an error.
    writeFileSync(
      path.join(project, 'types-are-real.ts'),
      `import { CustodyClient, type SignInOut, type Problem } from '@custody/client';
const client = new CustodyClient({ baseUrl: 'http://127.0.0.1:1' });
export const f = async (): Promise<void> => {
  const wallet: SignInOut = await client.signIn('pk_test_x', 'jwt');
  // @ts-expect-error walletId is a number
  const id: string = wallet.walletId;
  // @ts-expect-error no such method
  await client.wallets.rpc({ projectId: 1, walletId: 2 }, { method: 'eth_sign', params: {} });
  // @ts-expect-error a problem's code is text
  const code: number = ({} as Problem).code;
  void id;
  void code;
};
`,
    );
    writeFileSync(
      path.join(project, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          target: 'ES2022',
          module: 'NodeNext',
          moduleResolution: 'NodeNext',
          strict: true,
          types: ['node'],
          skipLibCheck: true,
          outDir: 'out',
        },
        files: ['sign-in-and-sign.ts', 'types-are-real.ts'],
      }),
    );
    await run(process.execPath, [path.join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.json'], { cwd: project }).catch(
      (e: Error & { stdout?: string }) => {
        throw new Error(`tsc failed in the consumer project:\n${e.stdout ?? e.message}`);
      },
    );
    const out = await run(process.execPath, ['out/sign-in-and-sign.js'], {
      cwd: project,
      env: {
        ...process.env,
        CUSTODY_URL: env.app.url,
        CUSTODY_PROJECT_ID: String(projectId),
        CUSTODY_PROJECT_KEY: projectKey,
        CUSTODY_SIGNER_TOKEN: signerToken,
        USER_JWT: userJwt,
      },
    });
    const steps = Object.fromEntries(
      out.stdout
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as { step: string; message?: string; signature?: string })
        .map((s) => [s.step, s]),
    );
    expect(steps['signin']).to.include({ walletAddress, isNew: false });
    for (const step of ['user', 'backend', 'viem', 'ethers']) {
      const { message = '', signature = '' } = steps[step] ?? {};
      expect(verifyMessage(message, signature), step).to.equal(walletAddress);
    }
    expect(steps['refused']).to.include({ status: 403, code: 'policy_denied' });
  });

  /** A project with a policy, a signed-in user's wallet and a signer token. */
  async function tenant() {
    const operator = new CustodyClient({ baseUrl: env.app.url, token: env.app.operatorToken });
    const iss = await env.idp.issuer();
    const org = await operator.createOrganisation('Package');
    const created = await operator.createProject(org.id, { name: 'Package', issuer: iss.issuer });
    await operator.putPolicy(created.id, {
      rules: [
        {
          name: 'user sign-in',
          action: 'allow',
          method: 'personal_sign',
          caller: ['user'],
          conditions: [{ field: 'message', op: 'prefix', value: 'Sign in to ' }],
        },
        ...['Order ', 'Signed through '].map((prefix) => ({
          name: `backend ${prefix.trim()}`,
          action: 'allow' as const,
          method: 'personal_sign' as const,
          caller: ['server' as const],
          conditions: [{ field: 'message', op: 'prefix' as const, value: prefix }],
        })),
      ],
    });
    const userJwt = await iss.sign({ email: 'package@example.com' }, { audience: AUDIENCE });
    const wallet = await operator.signIn(created.projectKey, userJwt);
    const signer = await operator.createToken(org.id, { name: 'backend', role: 'signer', projectId: created.id });
    return {
      projectId: created.id,
      projectKey: created.projectKey,
      walletId: wallet.walletId,
      walletAddress: wallet.walletAddress,
      signerToken: signer.token,
      userJwt,
    };
  }
});
