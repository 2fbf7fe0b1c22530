import { keccak_256 } from '@noble/hashes/sha3.js';

/**
 * A function signature such as `transfer(address,uint256)` and the decoding of a call's static
 * arguments by it. Only static types (address, bool, uintN, intN, bytesN): their words sit at
 * fixed offsets, so a condition on argument n reads exactly one word, and nothing of a dynamic
 * encoding (offsets, lengths) has to be trusted.
 */
export type ArgValue =
  { kind: 'address'; value: string } | { kind: 'quantity'; value: bigint } | { kind: 'boolean'; value: boolean } | { kind: 'hex'; value: string };

export interface FunctionAbi {
  signature: string;
  selector: string;
  args: string[];
}

const STATIC =
  /^(address|bool|u?int(8|16|24|32|40|48|56|64|72|80|88|96|104|112|120|128|136|144|152|160|168|176|184|192|200|208|216|224|232|240|248|256)|bytes([1-9]|[12][0-9]|3[0-2]))$/;

/** Parses `name(type,…)`; undefined when it is not a signature of static arguments. */
export function parseFunctionAbi(signature: string): FunctionAbi | undefined {
  const m = /^([A-Za-z_$][A-Za-z0-9_$]{0,63})\(([^()]*)\)$/.exec(signature);
  if (!m) return undefined;
  const args = m[2] === '' ? [] : (m[2] ?? '').split(',');
  if (args.length > 32 || !args.every((a) => STATIC.test(a))) return undefined;
  const selector = `0x${Buffer.from(keccak_256(new TextEncoder().encode(signature)).subarray(0, 4)).toString('hex')}`;
  return { signature, selector, args };
}

/**
 * `data` as a call of this function: its arguments when it is the one encoding the ABI defines
 * (the selector, then one word per argument, each clean for its type, and nothing after);
 * `another call` when it does not start with the selector; `non-canonical` when it does but is
 * any other encoding. Decoders differ on those: Solidity ignores trailing bytes, ABI coder v1
 * ignores the high bits of an address, a bool, a short integer or the low bytes of a bytesN
 * where v2 reverts, and before 0.5 a call too short was padded with zeros. No one reading of them
 * is the contract's, so a rule cannot judge their arguments.
 */
export type Call = ArgValue[] | 'another call' | 'non-canonical';

export function readCall(abi: FunctionAbi, data: Uint8Array): Call {
  if (data.length < 4 || `0x${Buffer.from(data.subarray(0, 4)).toString('hex')}` !== abi.selector) return 'another call';
  if (data.length !== 4 + 32 * abi.args.length) return 'non-canonical';
  const out: ArgValue[] = [];
  for (const [i, type] of abi.args.entries()) {
    const w = data.subarray(4 + 32 * i, 36 + 32 * i);
    const n = BigInt(`0x${Buffer.from(w).toString('hex')}`);
    if (type === 'address') {
      if (n >> 160n !== 0n) return 'non-canonical';
      // Lower case: conditions compare addresses without case, and a checksum would cost a hash per argument.
      out.push({ kind: 'address', value: `0x${n.toString(16).padStart(40, '0')}` });
    } else if (type === 'bool') {
      if (n > 1n) return 'non-canonical';
      out.push({ kind: 'boolean', value: n === 1n });
    } else if (type.startsWith('bytes')) {
      const size = Number(type.slice(5));
      if (w.subarray(size).some((b) => b !== 0)) return 'non-canonical';
      out.push({ kind: 'hex', value: `0x${Buffer.from(w.subarray(0, size)).toString('hex')}` });
    } else {
      const bits = BigInt(type.replace(/^u?int/, ''));
      if (type.startsWith('uint')) {
        if (n >> bits !== 0n) return 'non-canonical';
        out.push({ kind: 'quantity', value: n });
      } else {
        const v = BigInt.asIntN(256, n);
        if (v !== BigInt.asIntN(Number(bits), v)) return 'non-canonical';
        out.push({ kind: 'quantity', value: v });
      }
    }
  }
  return out;
}
