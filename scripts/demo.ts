/**
 * `npm run demo`: the five-minute tour. Starts the service with its embedded defaults (an embedded
 * PostgreSQL, the local signer), a local HTTPS identity provider with a CA made now, and a
 * webhook receiver; then signs a user in, shows the wallet and the verified wallet-created
 * webhook, issues and views a membership, sets a signing policy and has the user sign a
 * sign-in-with-Ethereum message under it (verified with viem); when anvil is installed (the
 * dev dependency `@foundry-rs/anvil`), the user also sends one transaction on a local anvil and the
 * demo follows it to confirmed. Every step is printed.
 *
 * DEMO_DATA_DIR (default .data/demo) holds the demo's database and keys; `--keep` leaves the
 * service running afterwards so you can try the API yourself (Ctrl-C stops everything).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, createWriteStream, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Webhook } from 'standardwebhooks';
import { CustodyApiError, CustodyClient } from '../src/programs/client/index.js';
import { TestIdp } from '../test/support/idp.js';
import { startAnvil, type Anvil } from '../test/support/anvil.js';
import { Receiver } from '../test/support/receiver.js';
import { freePort, until } from '../test/support/wait.js';

const MAIN = fileURLToPath(new URL('../src/programs/main.js', import.meta.url));
const AUDIENCE = 'urn:custody:testnet';
const keep = process.argv.includes('--keep');
const out = (line = '') => process.stdout.write(`${line}\n`);
const show = (value: unknown) => out(JSON.stringify(value, null, 2).replace(/^/gm, '    '));
let stepNo = 0;
const step = (title: string) => out(`\n[${++stepNo}] ${title}`);

async function main(): Promise<number> {
  const dataDir = path.resolve(process.env['DEMO_DATA_DIR'] ?? '.data/demo');
  mkdirSync(dataDir, { recursive: true });
  // The embedded PostgreSQL runs as `postgres` when we are root: it must be able to enter the directory.
  chmodSync(dataDir, 0o755);
  const logFile = path.join(dataDir, 'service.log');

  step('Starting a local HTTPS identity provider (its own CA, RSA keys made now) and a webhook receiver');
  const idp = await TestIdp.start();
  const issuer = await idp.issuer('demo');
  const caFile = path.join(dataDir, 'demo-idp-ca.pem');
  writeFileSync(caFile, idp.caPem);
  const receiver = await Receiver.start();
  out(`    identity provider: ${issuer.issuer}`);
  out(`    webhook receiver:  ${receiver.url}`);

  // A local EVM node, when anvil is installed (a dev dependency): the service sends on it.
  let anvil: Anvil | undefined;
  try {
    anvil = await startAnvil();
    out(`    local EVM node:    anvil on ${anvil.url} (chain ${anvil.chainId})`);
  } catch {
    out('    (anvil is not installed: the demo sends no transaction)');
  }
  const chains = anvil
    ? JSON.stringify([
        {
          chainId: anvil.chainId,
          name: 'anvil',
          rpcUrls: [anvil.url],
          confirmations: 1,
          maxFeePerGas: '50000000000',
          maxPriorityFeePerGas: '2000000000',
          blockTimeMs: 250,
        },
      ])
    : undefined;

  step('Starting the service (ROLE=all: embedded PostgreSQL, local signer, API, relay)');
  const port = Number(process.env['DEMO_PORT'] ?? (await freePort()));
  const operatorToken = `sk_test_${randomBytes(24).toString('base64url')}`;
  const log = createWriteStream(logFile, { flags: 'a' });
  const service: ChildProcess = spawn(process.execPath, [MAIN], {
    env: {
      ...process.env,
      ROLE: 'all',
      APP_ENV: 'testnet',
      PORT: String(port),
      DATA_DIR: dataDir,
      EMBEDDED_PG_PORT: String(await freePort()),
      OPERATOR_TOKEN: operatorToken,
      OIDC_CA_FILE: caFile,
      RELAY_POLL_MS: '200',
      LOG_LEVEL: 'info',
      ...(chains ? { CHAINS: chains } : {}),
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  service.stdout?.pipe(log);
  service.stderr?.pipe(log);
  let exited: number | null | undefined;
  service.on('exit', (code) => (exited = code));
  const stop = async () => {
    if (exited === undefined) {
      service.kill('SIGTERM');
      await new Promise((r) => service.once('exit', r));
    }
    await receiver.close();
    await idp.close();
    await anvil?.stop();
  };

  try {
    const url = `http://127.0.0.1:${port}`;
    const operator = new CustodyClient({ baseUrl: url, token: operatorToken });
    await until(
      'the service to be ready',
      async () => {
        if (exited !== undefined) throw new Error(`the service exited with code ${exited}; see ${logFile}`);
        return (await operator.getReadiness().catch(() => undefined))?.status === 'ready';
      },
      180_000,
    );
    out(`    ready at ${url} (logs: ${logFile})`);

    step('Creating an organisation and a project registered for that identity provider (operator token)');
    const org = await operator.createOrganisation(`Demo ${new Date().toISOString()}`);
    const project = await operator.createProject(org.id, { name: 'Demo app', issuer: issuer.issuer, walletWebhookUrl: `${receiver.url}/wallet-created` });
    const admin = await operator.createToken(org.id, { name: 'demo', role: 'admin', projectId: project.id });
    out(`    organisation ${org.id}, project ${project.id}, project key ${project.projectKey.slice(0, 12)}… (shown once)`);

    step('Signing a user in: the IdP issues an ID token for ada@example.com, the customer backend calls POST /api/v1/signin');
    const jwt = await issuer.sign({ email: 'ada@example.com', email_verified: true }, { audience: AUDIENCE });
    const wallet = await operator.signIn(project.projectKey, jwt, 'demo-signup');
    show(wallet);

    step('The wallet-created webhook arrives at the receiver; its signature is verified with the standardwebhooks package');
    const received = await until('the wallet-created webhook', () => receiver.received[0], 30_000);
    const verified = new Webhook(project.walletWebhookSecret ?? '').verify(received.body, received.headers as Record<string, string>);
    out(`    webhook-id ${String(received.headers['webhook-id'])}: signature valid`);
    show(verified);

    step('Issuing a membership (gym:gold) to that wallet with a project API token');
    const client = new CustodyClient({ baseUrl: url, token: admin.token });
    const issued = await client.issueMemberships([
      { membershipType: 'gym:gold', walletAddress: wallet.walletAddress, transferable: true, expiration: Math.floor(Date.now() / 1000) + 365 * 86_400 },
    ]);
    show(issued.memberships[0]);

    step("Viewing the wallet's memberships");
    const view = await client.viewMemberships({ walletAddress: wallet.walletAddress });
    show(view);

    step("Setting the project's signing policy: sign-in-with-Ethereum messages for demo.example.com, from the user present only");
    const siwePrefix = 'demo.example.com wants you to sign in with your Ethereum account:';
    const policy = await client.putPolicy(project.id, {
      rules: [
        {
          name: 'sign-in messages',
          action: 'allow',
          method: 'personal_sign',
          caller: ['user'],
          conditions: [{ field: 'message', op: 'prefix', value: siwePrefix }],
        },
        // Small sends by the user present (the demo's last step, on a local anvil).
        {
          name: 'small sends',
          action: 'allow',
          method: 'eth_sendTransaction',
          caller: ['user'],
          conditions: [{ field: 'value', op: 'lte', value: '1000000000000000' }],
        },
      ],
    });
    out(`    policy version ${policy.version}: default deny, one allow rule`);

    step('The user signs a sign-in-with-Ethereum (EIP-4361) message with their wallet (POST /api/v1/wallets/rpc: their JWT and the project key)');
    const message = [
      siwePrefix,
      wallet.walletAddress,
      '',
      'Sign in to the demo app.',
      '',
      'URI: https://demo.example.com',
      'Version: 1',
      'Chain ID: 1',
      `Nonce: ${randomBytes(8).toString('hex')}`,
      `Issued At: ${new Date().toISOString()}`,
    ].join('\n');
    const { signature } = (await operator.wallets.rpc({ projectKey: project.projectKey, userJwt: jwt }, { method: 'personal_sign', params: { message } })) as {
      signature: `0x${string}`;
    };
    // An implementation other than the service's own checks it (viem, loaded only here).
    const { verifyMessage } = await import('viem');
    const valid = await verifyMessage({ address: wallet.walletAddress as `0x${string}`, message, signature });
    out(`    signature ${signature.slice(0, 18)}…: verified with viem for ${wallet.walletAddress}: ${valid ? 'valid' : 'INVALID'}`);
    if (!valid) throw new Error('the signature did not verify');
    try {
      await operator.wallets.rpc({ projectKey: project.projectKey, userJwt: jwt }, { method: 'personal_sign', params: { message: 'transfer everything' } });
      throw new Error('a message outside the policy was signed');
    } catch (err) {
      if (!(err instanceof CustodyApiError) || err.problem?.code !== 'policy_denied') throw err;
      out(`    anything else is refused: ${err.status} ${err.problem.code} (${err.problem.detail})`);
    }

    if (anvil) {
      step('The user sends 0.001 ether on the local anvil (POST /api/v1/wallets/transactions); the service follows it to confirmed');
      await anvil.fund(wallet.walletAddress, 10n ** 18n);
      const sent = await operator.transactions.sendAsUser(
        { projectKey: project.projectKey, userJwt: jwt },
        { chainId: anvil.chainId, to: '0x000000000000000000000000000000000000dEaD', value: '1000000000000000' },
        { idempotencyKey: `demo-send-${randomBytes(4).toString('hex')}` },
      );
      const done = await until(
        'the transaction to be confirmed',
        async () => {
          const t = await client.transactions.get(project.id, sent.id);
          return t.status === 'confirmed' || t.status === 'failed' ? t : undefined;
        },
        60_000,
      );
      out(`    transaction ${done.id}: ${done.status} at nonce ${String(done.nonce)}, hash ${String(done.hash)}, block ${String(done.blockNumber)}`);
      if (done.status !== 'confirmed') throw new Error(`the transaction ${done.status}: ${JSON.stringify(done.error)}`);
    }

    out(`\nDone. The API reference of this service: ${url}/docs`);
    if (keep) {
      // Everything needed to go on by hand, in full (the demo's data only: it is a throwaway testnet).
      out('\nThe service keeps running (Ctrl-C stops it and the demo identity provider). To go on by hand:');
      out(`  API=${url}/api/v1`);
      out(`  OPERATOR_TOKEN=${operatorToken}`);
      out(`  PROJECT=${project.id}`);
      out(`  PROJECT_KEY=${project.projectKey}`);
      out(`  PROJECT_ADMIN_TOKEN=${admin.token}`);
      out(`  USER_JWT=${jwt}    # ada@example.com, valid for an hour`);
      out(`  WALLET=${wallet.walletAddress}`);
      out('Then, for example:');
      out(`  curl -s "$API/membership/view?walletAddress=$WALLET" -H "Authorization: Bearer $PROJECT_ADMIN_TOKEN"`);
      out(
        `  curl -s $API/wallets/rpc -H "Authorization: Bearer $USER_JWT" -H 'Content-Type: application/json' -d "{\\"key\\":\\"$PROJECT_KEY\\",\\"method\\":\\"personal_sign\\",\\"params\\":{\\"message\\":\\"${siwePrefix} (by hand)\\"}}"`,
      );
      out('A fresh user token: sign in again through the demo (its identity provider lives only while it runs).');
      await new Promise<void>((resolve) => process.once('SIGINT', () => resolve()));
    }
    return 0;
  } catch (err) {
    process.stderr.write(`\ndemo failed at step ${stepNo}: ${err instanceof Error ? err.message : String(err)}\n`);
    try {
      process.stderr.write(`last lines of ${logFile}:\n${readFileSync(logFile, 'utf8').split('\n').slice(-15).join('\n')}\n`);
    } catch {
      // no log yet
    }
    return 1;
  } finally {
    await stop();
  }
}

process.exitCode = await main();
