import { expect } from 'chai';
import { SignerError } from '../../../keyvault/errors.js';
import { parsePolicy } from '../../../keyvault/policy/document.js';
import { evaluate } from '../../../keyvault/policy/evaluate.js';
import { parseOperation } from '../../../keyvault/sign/operation.js';
import { siwePolicy as siwe } from '../../support/policies.js';

/** Who may sign what, as a table: the policy, the operation, the caller, and the decision with the rule that made it. */
const ALICE = '0x00000000000000000000000000000000000A11CE';
const BOB = '0x0000000000000000000000000000000000000B0B';
const USDC = '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913';
const word = (hex: string) => hex.replace(/^0x/, '').toLowerCase().padStart(64, '0');
const transfer = (to: string, amount: bigint) => `0xa9059cbb${word(to)}${word(amount.toString(16))}`;

const tx = (fields: Record<string, unknown>) => ({
  method: 'eth_signTransaction',
  params: { transaction: { chainId: 8453, nonce: 1, gas: 60000, maxFeePerGas: '1000', maxPriorityFeePerGas: '1', ...fields } },
});
const message = (m: string) => ({ method: 'personal_sign', params: { message: m } });
const authorization = (chainId: number, address: string) => ({ method: 'eth_signAuthorization', params: { chainId, address, nonce: 0 } });
const permit = (spender: string, value: string, chainId = 1) => ({
  method: 'eth_signTypedData_v4',
  params: {
    typedData: {
      types: {
        Permit: [
          { name: 'owner', type: 'address' },
          { name: 'spender', type: 'address' },
          { name: 'value', type: 'uint256' },
        ],
      },
      primaryType: 'Permit',
      domain: { name: 'USD Coin', chainId, verifyingContract: USDC },
      message: { owner: ALICE, spender, value },
    },
  },
});

const payments = {
  rules: [
    {
      name: 'small payments on Base',
      action: 'allow',
      method: 'eth_signTransaction',
      conditions: [
        { field: 'chainId', op: 'in', value: [8453] },
        { field: 'to', op: 'in', value: [ALICE, BOB] },
        { field: 'value', op: 'lte', value: '100000000000000000' },
      ],
    },
    { name: 'never Bob on a Friday', action: 'deny', method: 'eth_signTransaction', conditions: [{ field: 'to', op: 'eq', value: BOB.toLowerCase() }] },
  ],
};
const erc20 = {
  rules: [
    {
      name: 'USDC to the allowlist',
      action: 'allow',
      method: 'eth_signTransaction',
      abi: 'transfer(address,uint256)',
      conditions: [
        { field: 'to', op: 'eq', value: USDC },
        { field: 'data.selector', op: 'eq', value: '0xA9059CBB' },
        { field: 'data.args.0', op: 'in', value: [ALICE] },
        { field: 'data.args.1', op: 'lte', value: 1000 },
      ],
    },
  ],
};
const creations = {
  rules: [
    { name: 'known recipients', action: 'allow', method: 'eth_signTransaction', conditions: [{ field: 'to', op: 'in', value: [ALICE] }] },
    { name: 'anything but creations', action: 'allow', method: 'eth_signTransaction', conditions: [{ field: 'data.length', op: 'eq', value: 0 }] },
    { name: 'no unknown targets', action: 'deny', method: 'eth_signTransaction', conditions: [{ field: 'to', op: 'not_in', value: [ALICE, BOB] }] },
  ],
};
const delegates = (anyChain: boolean) => ({
  rules: [
    {
      name: 'our delegate',
      action: 'allow',
      method: 'eth_signAuthorization',
      conditions: [{ field: 'address', op: 'eq', value: ALICE }, ...(anyChain ? [{ field: 'chainId', op: 'in', value: [0, 8453] }] : [])],
    },
  ],
});
const permits = {
  rules: [
    {
      name: 'USDC permits to Bob',
      action: 'allow',
      method: 'eth_signTypedData_v4',
      conditions: [
        { field: 'primaryType', op: 'eq', value: 'Permit' },
        { field: 'domain.chainId', op: 'eq', value: '1' },
        { field: 'domain.verifyingContract', op: 'eq', value: USDC.toLowerCase() },
        { field: 'message.spender', op: 'eq', value: BOB },
        { field: 'message.value', op: 'lte', value: '1000000' },
      ],
    },
  ],
};
const huge = {
  rules: [
    {
      name: 'up to 2^256 - 1',
      action: 'allow',
      method: 'eth_signTransaction',
      conditions: [{ field: 'value', op: 'lte', value: ((1n << 256n) - 1n).toString() }],
    },
  ],
};

const table: Array<[string, unknown, unknown, 'user' | 'server', boolean, string | null]> = [
  ['no policy signs nothing', undefined, message('hello'), 'user', false, null],
  ['an empty policy signs nothing', { rules: [] }, message('hello'), 'user', false, null],
  ['a sign-in message from the user', siwe, message('app.example.com wants you to sign in with your Ethereum account:\n0x…'), 'user', true, 'sign-in messages'],
  ['the same message from the backend', siwe, message('app.example.com wants you to sign in with your Ethereum account'), 'server', false, null],
  ['another message from the user', siwe, message('evil.example wants you to sign in'), 'user', false, null],
  ['a payment within the rule', payments, tx({ to: ALICE, value: '100000000000000000' }), 'server', true, 'small payments on Base'],
  ['one wei over the bound', payments, tx({ to: ALICE, value: '100000000000000001' }), 'server', false, null],
  ['the same payment on another chain', payments, tx({ chainId: 1, to: ALICE, value: '1' }), 'server', false, null],
  ['a deny beats a matching allow', payments, tx({ to: BOB, value: '1' }), 'server', false, 'never Bob on a Friday'],
  ['a value near 2^256 compared as a big integer', huge, tx({ value: ((1n << 256n) - 1n).toString() }), 'server', true, 'up to 2^256 - 1'],
  ['an ERC-20 transfer to the allowlist', erc20, tx({ to: USDC, data: transfer(ALICE, 1000n) }), 'server', true, 'USDC to the allowlist'],
  ['an ERC-20 transfer over the amount', erc20, tx({ to: USDC, data: transfer(ALICE, 1001n) }), 'server', false, null],
  ['an ERC-20 transfer to someone else', erc20, tx({ to: USDC, data: transfer(BOB, 1n) }), 'server', false, null],
  ['calldata one byte longer than the call', erc20, tx({ to: USDC, data: `${transfer(ALICE, 1n)}00` }), 'server', false, null],
  ['an approve, not a transfer', erc20, tx({ to: USDC, data: transfer(ALICE, 1n).replace('a9059cbb', '095ea7b3') }), 'server', false, null],
  ['a contract creation is not a known recipient, and is an unknown target', creations, tx({ data: '0x6000' }), 'server', false, 'no unknown targets'],
  ['a plain transfer to a known recipient', creations, tx({ to: ALICE }), 'server', true, 'known recipients'],
  ['a delegation to our contract on one chain', delegates(false), authorization(8453, ALICE), 'server', true, 'our delegate'],
  ['a delegation for any chain under a rule that does not name chain 0', delegates(false), authorization(0, ALICE), 'server', false, null],
  ['a delegation for any chain under a rule that names chain 0', delegates(true), authorization(0, ALICE), 'server', true, 'our delegate'],
  ['a delegation to another contract', delegates(true), authorization(8453, BOB), 'server', false, null],
  ['a permit within the rule', permits, permit(BOB, '1000000'), 'user', true, 'USDC permits to Bob'],
  ['a permit over the amount', permits, permit(BOB, '1000001'), 'user', false, null],
  ['a permit to another spender', permits, permit(ALICE, '1'), 'user', false, null],
  ['a permit on another chain', permits, permit(BOB, '1', 10), 'user', false, null],
];

describe('signing policies: decisions', () => {
  for (const [what, policy, body, caller, allowed, rule] of table) {
    it(`${what}: ${allowed ? 'allowed' : 'denied'} by ${rule ?? 'no rule'}`, () => {
      const decision = evaluate(policy === undefined ? undefined : parsePolicy(policy), parseOperation(body), caller);
      expect(decision).to.deep.equal({ allowed, rule });
    });
  }
});

describe('signing policies: documents refused when written', () => {
  const rule = (extra: Record<string, unknown>) => ({ rules: [{ name: 'r', action: 'allow', method: 'eth_signTransaction', ...extra }] });
  const refusals: Array<[string, unknown, string]> = [
    ['not an object', [], '/'],
    ['an unknown top-level field', { rules: [], owners: [] }, 'owners'],
    ['a field outside the catalogue', rule({ conditions: [{ field: 'from', op: 'eq', value: ALICE }] }), '/rules/0/conditions/0/field'],
    ['an order on an address', rule({ conditions: [{ field: 'to', op: 'lt', value: ALICE }] }), '/rules/0/conditions/0/op'],
    ['a regular expression', rule({ conditions: [{ field: 'to', op: 'matches', value: '.*' }] }), '/rules/0/conditions/0/op'],
    ['a bad address value', rule({ conditions: [{ field: 'to', op: 'eq', value: '0x12' }] }), '/rules/0/conditions/0/value'],
    ['an empty list for in', rule({ conditions: [{ field: 'chainId', op: 'in', value: [] }] }), '/rules/0/conditions/0/value'],
    ['a list for eq', rule({ conditions: [{ field: 'chainId', op: 'eq', value: [1] }] }), '/rules/0/conditions/0/value'],
    ['a call argument without an abi', rule({ conditions: [{ field: 'data.args.0', op: 'eq', value: ALICE }] }), 'needs an "abi"'],
    ['an argument the function does not have', rule({ abi: 'transfer(address,uint256)', conditions: [{ field: 'data.args.2', op: 'eq', value: 1 }] }), 'has 2'],
    ['an abi with a dynamic argument', rule({ abi: 'f(string)' }), '/rules/0/abi'],
    ['an abi on messages', { rules: [{ name: 'r', action: 'allow', method: 'personal_sign', abi: 'f()' }] }, '/rules/0/abi'],
    ['an unknown action', { rules: [{ name: 'r', action: 'maybe', method: 'personal_sign' }] }, '/rules/0/action'],
    ['an unknown caller', { rules: [{ name: 'r', action: 'allow', method: 'personal_sign', caller: ['admin'] }] }, '/rules/0/caller'],
    [
      'two rules of one name',
      {
        rules: [
          { name: 'r', action: 'allow', method: 'personal_sign' },
          { name: 'r', action: 'deny', method: 'personal_sign' },
        ],
      },
      '/rules/1/name',
    ],
    ['a window not offered', { rules: [], limits: [{ method: 'personal_sign', per: 'wallet', window: '5s', count: 1 }] }, '/limits/0/window'],
    ['a limit of zero', { rules: [], limits: [{ method: 'personal_sign', per: 'wallet', window: '24h', count: 0 }] }, '/limits/0/count'],
  ];
  for (const [what, doc, names] of refusals) {
    it(`refuses ${what}, naming it`, () => {
      let err: unknown;
      try {
        parsePolicy(doc);
      } catch (e) {
        err = e;
      }
      expect(err).to.be.instanceOf(SignerError);
      expect((err as SignerError).code).to.equal('invalid_policy');
      expect((err as SignerError).message).to.include(names);
    });
  }
});
