import { expect } from 'chai';
import { SignerError } from '../../../keyvault/errors.js';
import { LIMITS } from '../../../keyvault/limits.js';
import { parsePolicy } from '../../../keyvault/policy/document.js';
import { Deferred, Meter } from '../../../keyvault/sign/meter.js';
import { parseOperation, readOperation } from '../../../keyvault/sign/operation.js';
import { MAX_BODY_DEPTH, MAX_BODY_VALUES, MAX_OBJECT_MEMBERS, measureJson } from '../../../src/platform/http/body.js';
import { FAR_PAST_VALUES, LIMIT_CASES, MAXIMAL, REAL_TYPED_DATA, typedDataOfValues } from '../../support/limits.js';

const address0 = '0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed';

/** The refusal an operation gets, with the work its reading did before it (units of the Meter). */
function refused(body: unknown): { err: SignerError; units: number } {
  const meter = new Meter();
  try {
    parseOperation(body, meter);
  } catch (err) {
    if (err instanceof SignerError) return { err, units: meter.units };
    throw err;
  }
  throw new Error('accepted');
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0;
function medianMs(fn: () => void, runs = 5): number {
  const times: number[] = [];
  for (let i = 0; i < runs; i++) {
    const started = performance.now();
    fn();
    times.push(performance.now() - started);
  }
  return median(times);
}
const swallow = (fn: () => unknown) => () => {
  try {
    fn();
  } catch {
    // A refusal: what is timed.
  }
};

describe('signer operations: every shape limit, at it and one past it', function () {
  this.timeout(60_000);

  for (const c of LIMIT_CASES) {
    it(`${c.name}: accepted at the limit, refused one past it naming it`, () => {
      expect(parseOperation(c.at()).digest).to.have.length(32);
      const { err } = refused(c.past());
      expect(err.code).to.equal('invalid_operation');
      expect(err.status).to.equal(400);
      expect(err.message).to.include(c.names);
    });
  }

  it('a request eight times past the values limit costs what the largest accepted one does: the reading stops at the first value past it', () => {
    const atLimit = new Meter();
    parseOperation(typedDataOfValues(LIMITS.typedData.values), atLimit);
    const { err, units } = refused(FAR_PAST_VALUES());
    expect(err.message).to.include(`past ${LIMITS.typedData.values} values`);
    expect(units).to.be.at.most(atLimit.units + 2);
  });

  it('refuses structures far past a count before reading them: a hundred thousand types or unknown fields cost less than the largest accepted operation', () => {
    const maximal = MAXIMAL['eth_signTypedData_v4']?.() ?? {};
    const accepted = medianMs(() => parseOperation(maximal));
    const wideTypes = { method: 'eth_signTypedData_v4', params: { typedData: { types: {}, primaryType: 'A', domain: {}, message: {} } } };
    const types = wideTypes.params.typedData.types as Record<string, unknown>;
    for (let i = 0; i < 100_000; i++) types[`T${i}`] = [];
    const wideMessage = typedDataOfValues(10) as { params: { typedData: { message: Record<string, unknown> } } };
    for (let i = 0; i < 100_000; i++) wideMessage.params.typedData.message[`k${i}`] = 1;
    for (const [what, body, names] of [
      ['types', wideTypes, `more than ${LIMITS.typedData.types} types`],
      ['message fields', wideMessage, 'and more'],
    ] as const) {
      expect(refused(body).err.message, what).to.include(names);
      const ms = medianMs(swallow(() => parseOperation(body)));
      expect(ms, `${what}: ${ms.toFixed(1)} ms against ${accepted.toFixed(1)} ms for the largest accepted operation`).to.be.below(accepted);
    }
  });

  it('names at most a few unknown fields, each cut short: a refusal does not grow with the request', () => {
    const body = { method: 'personal_sign', params: Object.fromEntries(Array.from({ length: 1000 }, (_, i) => [`${'x'.repeat(200)}${i}`, 1])) };
    const { err } = refused(body);
    expect(err.message.length).to.be.below(LIMITS.refusal.names * 70 + 100);
  });

  it('refuses a type naming every other type before assembling its encoding past the bytes hashed', () => {
    const types: Record<string, Array<{ name: string; type: string }>> = {};
    const long = (i: number) => `T${i}_${'x'.repeat(60)}`;
    for (let i = 0; i < LIMITS.typedData.types; i++)
      types[long(i)] = Array.from({ length: LIMITS.typedData.fieldsPerType }, (_, j) => ({
        name: `f${j}_${'y'.repeat(58)}`,
        type: `${long((i + 1 + j) % LIMITS.typedData.types)}[]`,
      }));
    // One element of each field's type: every type's hash is needed, each over the encodings of all.
    const empty = (t: string) => Object.fromEntries((types[t] ?? []).map((f) => [f.name, []]));
    const message = Object.fromEntries((types[long(0)] ?? []).map((f) => [f.name, [empty(f.type.slice(0, -2))]]));
    const body = { method: 'eth_signTypedData_v4', params: { typedData: { types, primaryType: long(0), domain: { chainId: 1 }, message } } };
    const { err, units } = refused(body);
    expect(err.message).to.include(`past ${LIMITS.hashedBytes} bytes hashed`);
    expect(units).to.be.at.most(LIMITS.hashedBytes / 136 + 200);
  });

  it("the main thread's meter defers past its budget; small operations stay within it", () => {
    for (const small of [
      { method: 'personal_sign', params: { message: 'app.example.com wants you to sign in with your Ethereum account' } },
      { method: 'personal_sign', params: { message: 'a'.repeat(LIMITS.messageBytes) } },
      { method: 'eth_signAuthorization', params: { chainId: 1, address: `0x${'22'.repeat(20)}`, nonce: 0 } },
      typedDataOfValues(20),
    ]) {
      const meter = Meter.inline();
      readOperation(small, meter);
      expect(meter.units).to.be.at.most(LIMITS.inline.work);
    }
    for (const large of Object.values(MAXIMAL).filter((m) => m !== MAXIMAL['personal_sign'] && m !== MAXIMAL['eth_signAuthorization'])) {
      expect(() => readOperation(large(), Meter.inline())).to.throw(Deferred);
    }
  });
});

describe('signer operations: real requests fit the limits comfortably', () => {
  for (const [what, typedData] of Object.entries(REAL_TYPED_DATA)) {
    it(`${what}: read, within half the bytes and values allowed, and through the API's measure of a body`, () => {
      const operation = { method: 'eth_signTypedData_v4', params: { typedData } };
      const meter = new Meter();
      expect(parseOperation(operation, meter).digest).to.have.length(32);
      const text = JSON.stringify({ key: 'pk_live_x', ...operation });
      expect(text.length, 'bytes').to.be.below(LIMITS.body.operation / 2);
      expect(measureJson(text, { depth: MAX_BODY_DEPTH, values: MAX_BODY_VALUES / 2, members: MAX_OBJECT_MEMBERS }), 'the API measure').to.equal(undefined);
      expect(
        measureJson(text, { depth: LIMITS.typedData.depth, values: LIMITS.typedData.values / 2, members: LIMITS.typedData.fieldsPerType }),
        'values and depth',
      ).to.equal(undefined);
    });
  }

  it('a sign-in-with-Ethereum message and a permit are read on the main thread; a bulk listing on a worker', () => {
    const siwe = `app.example.com wants you to sign in with your Ethereum account:\n${address0}\n\nSign in to the app.\n\nURI: https://app.example.com\nVersion: 1\nChain ID: 1\nNonce: 32891756\nIssued At: 2026-11-25T12:00:00Z`;
    for (const small of [
      { method: 'personal_sign', params: { message: siwe } },
      { method: 'eth_signTypedData_v4', params: { typedData: REAL_TYPED_DATA['EIP-2612 permit'] } },
    ])
      readOperation(small, Meter.inline());
    expect(() =>
      readOperation(
        {
          method: 'eth_signTypedData_v4',
          params: { typedData: REAL_TYPED_DATA['Seaport bulk listing of 64 orders (height 6), three consideration items each'] },
        },
        Meter.inline(),
      ),
    ).to.throw(Deferred);
  });
});

describe('signer policies: every shape limit, at it and one past it', () => {
  const P = LIMITS.policy;
  const rule = (i: number, conditions: unknown[] = []) => ({ name: `r${i}`, action: 'allow', method: 'eth_signTransaction', conditions });
  const inList = (n: number, from = 0) => ({ field: 'nonce', op: 'in', value: Array.from({ length: n }, (_, i) => from + i) });
  const cases: Array<[string, unknown, unknown, string]> = [
    ['rules', { rules: Array.from({ length: P.rules }, (_, i) => rule(i)) }, { rules: Array.from({ length: P.rules + 1 }, (_, i) => rule(i)) }, '/rules'],
    [
      'conditions per rule',
      {
        rules: [
          rule(
            0,
            Array.from({ length: P.conditionsPerRule }, () => inList(1)),
          ),
        ],
      },
      {
        rules: [
          rule(
            0,
            Array.from({ length: P.conditionsPerRule + 1 }, () => inList(1)),
          ),
        ],
      },
      '/rules/0/conditions',
    ],
    ['values per list', { rules: [rule(0, [inList(P.valuesPerList)])] }, { rules: [rule(0, [inList(P.valuesPerList + 1)])] }, '/rules/0/conditions/0/value'],
    [
      'condition values in all',
      { rules: Array.from({ length: P.values / P.valuesPerList }, (_, i) => rule(i, [inList(P.valuesPerList)])) },
      { rules: [...Array.from({ length: P.values / P.valuesPerList }, (_, i) => rule(i, [inList(P.valuesPerList)])), rule(99, [inList(1)])] },
      `past ${P.values} condition values`,
    ],
    [
      'text',
      { rules: [{ name: 't', action: 'allow', method: 'personal_sign', conditions: [{ field: 'message', op: 'prefix', value: 'a'.repeat(P.textChars) }] }] },
      {
        rules: [{ name: 't', action: 'allow', method: 'personal_sign', conditions: [{ field: 'message', op: 'prefix', value: 'a'.repeat(P.textChars + 1) }] }],
      },
      `at most ${P.textChars} characters`,
    ],
  ];
  for (const [what, at, past, names] of cases) {
    it(`${what}: accepted at the limit, refused one past it naming it`, () => {
      expect(parsePolicy(at).rules.length).to.be.greaterThan(0);
      expect(() => parsePolicy(past))
        .to.throw(SignerError)
        .that.satisfies((e: SignerError) => e.code === 'invalid_policy' && e.message.includes(names));
    });
  }
});
