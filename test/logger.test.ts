import { expect } from 'chai';
import { pino } from 'pino';
import { accessLine, BlockWriter, createLogger } from '../src/platform/logging/logger.js';
import { sink } from './support/log.js';

describe('access line', () => {
  const cases: Array<[string, string, string, number, number]> = [
    ['0b7d3c1e-4d7a-4a53-9a57-7d8f6c4b1e2a', 'POST', '/api/v1/signin', 200, 1.3],
    ['caller:id.1', 'GET', '/api/v1/project/7/wallets', 404, 0],
    ['x', 'PUT', '/a"b\\c/\u00e9/\u0001/' + 'long'.repeat(20), 500, 12345.6],
  ];

  it('is the line pino writes for the same fields, field for field and in the same order', () => {
    const ours = sink();
    const theirs = sink();
    const write = accessLine(createLogger('info', ours.stream));
    const reference = pino({ level: 'info', base: { service: 'custody' } }, theirs.stream);
    for (const [requestId, method, path, status, ms] of cases) {
      write(requestId, method, path, status, ms);
      reference.info({ requestId, method, path, status, ms }, 'request');
    }
    const a = ours.lines();
    const b = theirs.lines();
    expect(a).to.have.length(cases.length);
    for (let i = 0; i < cases.length; i++) {
      expect(Object.keys(a[i] ?? {})).to.deep.equal(Object.keys(b[i] ?? {}));
      expect(typeof a[i]?.['time']).to.equal('number');
      expect({ ...a[i], time: 0 }).to.deep.equal({ ...b[i], time: 0 });
    }
  });

  it('follows the logger level', () => {
    const out = sink();
    const log = createLogger('warn', out.stream);
    const write = accessLine(log);
    write('a', 'GET', '/', 200, 1);
    log.level = 'info';
    write('b', 'GET', '/', 200, 1);
    expect(out.lines().map((l) => l['requestId'])).to.deep.equal(['b']);
  });

  it('falls back to the logger itself for a logger not made by createLogger', () => {
    const out = sink();
    accessLine(pino({ level: 'info' }, out.stream))('c', 'GET', '/x', 201, 2);
    expect(out.lines()).to.have.length(1);
    expect(out.lines()[0]).to.include({ requestId: 'c', method: 'GET', path: '/x', status: 201, ms: 2, msg: 'request' });
  });
});

describe('log blocks', () => {
  it('hands lines on in order, in blocks of about 8 KiB, on flush, and what is left at exit', () => {
    const blocks: string[] = [];
    const atExit: string[] = [];
    const writer = new BlockWriter({ write: (b: string) => blocks.push(b) }, (b) => atExit.push(b));
    const line = (i: number) => `${JSON.stringify({ i, pad: 'x'.repeat(180) })}\n`;
    for (let i = 0; i < 100; i++) writer.write(line(i));
    // 100 lines of ~200 characters: two full blocks handed on, the rest pending.
    expect(blocks).to.have.length(2);
    expect(blocks.every((b) => b.length >= 8192 && b.length < 8192 + 250)).to.equal(true);
    writer.write(line(100));
    writer.flush();
    expect(blocks).to.have.length(3);
    writer.flush();
    expect(blocks).to.have.length(3);
    writer.write(line(101));
    writer.flushSync();
    expect(atExit).to.deep.equal([line(101)]);
    const all = [...blocks, ...atExit]
      .join('')
      .split('\n')
      .filter(Boolean)
      .map((l) => (JSON.parse(l) as { i: number }).i);
    expect(all).to.deep.equal(Array.from({ length: 102 }, (_, i) => i));
  });
});
