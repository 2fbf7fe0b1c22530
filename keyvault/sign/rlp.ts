/** Recursive-length prefix encoding (the yellow paper's appendix B): what transactions and 7702 tuples are hashed as. */
export type RlpItem = Uint8Array | readonly RlpItem[];

/** An integer as RLP wants it: big-endian, no leading zero bytes, zero as the empty string. */
export function integerBytes(n: bigint): Uint8Array {
  if (n < 0n) throw new RangeError('RLP integers are non-negative');
  if (n === 0n) return new Uint8Array(0);
  const hex = n.toString(16);
  return Uint8Array.from(Buffer.from(hex.length % 2 === 0 ? hex : `0${hex}`, 'hex'));
}

function header(length: number, short: number): Uint8Array {
  if (length <= 55) return Uint8Array.of(short + length);
  const len = integerBytes(BigInt(length));
  return Uint8Array.of(short + 55 + len.length, ...len);
}

export function rlpEncode(item: RlpItem): Uint8Array {
  if (item instanceof Uint8Array) {
    if (item.length === 1 && (item[0] ?? 0) < 0x80) return item;
    return Buffer.concat([header(item.length, 0x80), item]);
  }
  const body = Buffer.concat(item.map(rlpEncode));
  return Buffer.concat([header(body.length, 0xc0), body]);
}
