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

/**
 * The review's findings (issue 30): a deny rule was judged on the request's spelling, not on what
 * is signed. (a) personal_sign of the hex bytes of a denied text; (b) a denied ERC-20 transfer with
 * a trailing byte or dirty address bits. The generated cases are in spellings.test.ts.
 */
const hexText = (t: string) => `0x${Buffer.from(t, 'utf8').toString('hex')}`;
const DENIED = 'Transfer all funds to 0x0000000000000000000000000000000000000B0B';
const noTransfers = {
  rules: [
    { name: 'no transfers by message', action: 'deny', method: 'personal_sign', conditions: [{ field: 'message', op: 'prefix', value: 'Transfer all funds' }] },
    { name: 'any message', action: 'allow', method: 'personal_sign' },
  ],
};
const binary = { rules: [{ name: 'binary messages', action: 'allow', method: 'personal_sign', conditions: [{ field: 'isHex', op: 'eq', value: true }] }] };
const replacement = {
  rules: [
    { name: 'no replacement character', action: 'deny', method: 'personal_sign', conditions: [{ field: 'message', op: 'eq', value: 'a\uFFFD' }] },
    { name: 'any message', action: 'allow', method: 'personal_sign' },
  ],
};
const neverBob = {
  rules: [
    {
      name: 'never Bob',
      action: 'deny',
      method: 'eth_signTransaction',
      abi: 'transfer(address,uint256)',
      conditions: [{ field: 'data.args.0', op: 'eq', value: BOB }],
    },
    { name: 'no approvals', action: 'deny', method: 'eth_signTransaction', abi: 'approve(address,uint256)' },
    { name: 'USDC', action: 'allow', method: 'eth_signTransaction', conditions: [{ field: 'to', op: 'eq', value: USDC }] },
  ],
};
const dirty = (data: string, word: number, high: string) => `${data.slice(0, 10 + 64 * word)}${high}${data.slice(10 + 64 * word + high.length)}`;
const approve = (to: string, amount: bigint) => transfer(to, amount).replace('a9059cbb', '095ea7b3');
const signedInt = {
  rules: [
    { name: 'no negative deltas', action: 'deny', method: 'eth_signTypedData_v4', conditions: [{ field: 'message.delta', op: 'lt', value: '0' }] },
    { name: 'any typed data', action: 'allow', method: 'eth_signTypedData_v4' },
  ],
};
const delta = (value: unknown) => ({
  method: 'eth_signTypedData_v4',
  params: { typedData: { types: { Change: [{ name: 'delta', type: 'int64' }] }, primaryType: 'Change', domain: { name: 'x' }, message: { delta: value } } },
});

const spellings: Array<[string, unknown, unknown, boolean, string | null]> = [
  ['(a) the denied text', noTransfers, message(DENIED), false, 'no transfers by message'],
  ['(a) the denied text as hex', noTransfers, message(hexText(DENIED)), false, 'no transfers by message'],
  ['(a) the denied text as upper-case hex', noTransfers, message(`0x${hexText(DENIED).slice(2).toUpperCase()}`), false, 'no transfers by message'],
  ['(a) other text as hex', noTransfers, message(hexText('hello')), true, 'any message'],
  ['(a) bytes that are not UTF-8, under a deny rule on the text', noTransfers, message('0xff00'), false, 'no transfers by message'],
  [
    '(a) a sign-in message as hex: the same bytes',
    siwe,
    message(hexText('app.example.com wants you to sign in with your Ethereum account')),
    true,
    'sign-in messages',
  ],
  ['(a) bytes that are not UTF-8, under an allow rule on the text', siwe, message('0xff'), false, null],
  ['(a) isHex: text spelled in hex is text', binary, message(hexText('hello')), false, null],
  ['(a) isHex: bytes that are not text', binary, message('0xc0af'), true, 'binary messages'],
  ['(a) an unpaired surrogate, signed as U+FFFD', replacement, message('a\uD800'), false, 'no replacement character'],
  ['(b) the denied transfer', neverBob, tx({ to: USDC, data: transfer(BOB, 1n) }), false, 'never Bob'],
  ['(b) the denied transfer with a trailing byte', neverBob, tx({ to: USDC, data: `${transfer(BOB, 1n)}00` }), false, 'never Bob'],
  ['(b) the denied transfer with dirty address bits', neverBob, tx({ to: USDC, data: dirty(transfer(BOB, 1n), 0, 'ff') }), false, 'never Bob'],
  ['(b) the denied transfer cut short', neverBob, tx({ to: USDC, data: transfer(BOB, 256n).slice(0, -2) }), false, 'never Bob'],
  ['(b) another transfer', neverBob, tx({ to: USDC, data: transfer(ALICE, 1n) }), true, 'USDC'],
  ['(b) another transfer with a trailing byte: the deny rule cannot read it', neverBob, tx({ to: USDC, data: `${transfer(ALICE, 1n)}00` }), false, 'never Bob'],
  ['(b) an approval with a trailing byte', neverBob, tx({ to: USDC, data: `${approve(ALICE, 1n)}00` }), false, 'no approvals'],
  [
    '(b) an allowed transfer with dirty address bits, under an allow rule on it',
    erc20,
    tx({ to: USDC, data: dirty(transfer(ALICE, 1n), 0, '01') }),
    false,
    null,
  ],
  ['(b) an allowed transfer with dirty amount bits is a different amount', erc20, tx({ to: USDC, data: dirty(transfer(ALICE, 1n), 1, '01') }), false, null],
  ['a negative typed integer in decimal', signedInt, delta('-5'), false, 'no negative deltas'],
  ['a negative typed integer in hex', signedInt, delta('-0x05'), false, 'no negative deltas'],
  ['a negative typed integer as a number', signedInt, delta(-5), false, 'no negative deltas'],
  ['a positive typed integer in hex', signedInt, delta('0x05'), true, 'any typed data'],
];

describe('signing policies: what is signed decides, not how the request spells it', () => {
  for (const [what, policy, body, allowed, rule] of spellings) {
    it(`${what}: ${allowed ? 'allowed' : 'denied'} by ${rule ?? 'no rule'}`, () => {
      expect(evaluate(parsePolicy(policy), parseOperation(body), 'user')).to.deep.equal({ allowed, rule });
    });
  }

  it('a typed condition that cannot be judged (an order on a string) denies for a deny rule, does not allow for an allow rule', () => {
    const on = (action: string) => ({
      rules: [
        { name: 'r', action, method: 'eth_signTypedData_v4', conditions: [{ field: 'message.delta', op: 'gt', value: 0 }] },
        ...(action === 'deny' ? [{ name: 'any typed data', action: 'allow', method: 'eth_signTypedData_v4' }] : []),
      ],
    });
    const text = {
      method: 'eth_signTypedData_v4',
      params: { typedData: { types: { Change: [{ name: 'delta', type: 'string' }] }, primaryType: 'Change', domain: {}, message: { delta: '5' } } },
    };
    expect(evaluate(parsePolicy(on('deny')), parseOperation(text), 'user')).to.deep.equal({ allowed: false, rule: 'r' });
    expect(evaluate(parsePolicy(on('allow')), parseOperation(text), 'user')).to.deep.equal({ allowed: false, rule: null });
  });
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
    [
      'text with an unpaired surrogate (signed, it is U+FFFD)',
      { rules: [{ name: 'r', action: 'deny', method: 'personal_sign', conditions: [{ field: 'message', op: 'eq', value: 'a\uD800' }] }] },
      '/rules/0/conditions/0/value',
    ],
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
