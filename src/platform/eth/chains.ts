/**
 * The chains the service sends transactions on: operator configuration (CHAINS or CHAINS_FILE, a
 * JSON list), never a tenant's. RPC URLs may carry credentials (a provider's key in the path or
 * the user-info), so the list is a secret: read from a file or variable, never logged — logs
 * name a URL by its place in the list.
 */
export interface ChainConfig {
  readonly chainId: number;
  readonly name: string;
  /** Tried in order, failing over to the next on a transport fault (docs/transactions.md). */
  readonly rpcUrls: readonly string[];
  /** Blocks on top of a transaction's block, its own included, before it is `confirmed`. */
  readonly confirmations: number;
  /** Nothing is signed above these (wei): a send waits while the market is above them. */
  readonly maxFeePerGas: bigint;
  readonly maxPriorityFeePerGas: bigint;
  /** The priority fee offered when the fee history shows none (wei). */
  readonly minPriorityFeePerGas: bigint;
  /** The chain's block time, roughly: how often its transactions are looked at. */
  readonly blockTimeMs: number;
  /** A submitted transaction not mined after this long is re-priced (when the caps allow). */
  readonly stuckAfterMs: number;
  /** A replacement's fees are at least this much (percent) above the one it replaces: the mempools' rule. */
  readonly replacementBumpPercent: number;
  /** Added to the node's gas estimate (percent). */
  readonly gasMarginPercent: number;
  /** A send not signed within this long (fees above the caps all the while) is `expired`. */
  readonly queuedTtlMs: number;
  /** How long one RPC call may take before the next URL is tried. */
  readonly rpcTimeoutMs: number;
  /** How long a URL that failed is passed over (while another answers). */
  readonly rpcCooldownMs: number;
}

const DEFAULTS = {
  confirmations: 12,
  minPriorityFeePerGas: 1_000_000_000n,
  blockTimeMs: 12_000,
  replacementBumpPercent: 12,
  gasMarginPercent: 20,
  queuedTtlMs: 3_600_000,
};

const WEI = /^(0|[1-9][0-9]{0,30})$/;
const FIELDS = new Set([
  'chainId',
  'name',
  'rpcUrls',
  'confirmations',
  'maxFeePerGas',
  'maxPriorityFeePerGas',
  'minPriorityFeePerGas',
  'blockTimeMs',
  'stuckAfterMs',
  'replacementBumpPercent',
  'gasMarginPercent',
  'queuedTtlMs',
  'rpcTimeoutMs',
  'rpcCooldownMs',
]);

/** Reads the chain list; every problem is pushed (naming the chain and field, never a URL). */
export function readChains(text: string | undefined, problems: string[]): ChainConfig[] {
  if (text === undefined || text.trim() === '') return [];
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    problems.push('CHAINS must be JSON: a list of chains (docs/transactions.md)');
    return [];
  }
  if (!Array.isArray(raw)) {
    problems.push('CHAINS must be a JSON list of chains');
    return [];
  }
  const chains: ChainConfig[] = [];
  const seen = new Set<number>();
  raw.forEach((c: unknown, i) => {
    const at = `CHAINS[${i}]`;
    if (typeof c !== 'object' || c === null || Array.isArray(c)) return void problems.push(`${at} must be an object`);
    const o = c as Record<string, unknown>;
    const unknown = Object.keys(o).filter((k) => !FIELDS.has(k));
    if (unknown.length > 0) problems.push(`${at} has unknown fields: ${unknown.slice(0, 5).join(', ')}`);
    const int = (name: string, fallback: number | undefined, min: number, max: number): number => {
      const v = o[name] ?? fallback;
      if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < min || v > max) {
        problems.push(`${at}.${name} must be an integer from ${min} to ${max}`);
        return min;
      }
      return v;
    };
    const wei = (name: string, fallback?: bigint): bigint => {
      const v = o[name] ?? (fallback === undefined ? undefined : String(fallback));
      if (typeof v !== 'string' || !WEI.test(v)) {
        problems.push(`${at}.${name} must be an amount of wei as a decimal string`);
        return 0n;
      }
      return BigInt(v);
    };
    const chainId = int('chainId', undefined, 1, Number.MAX_SAFE_INTEGER);
    if (seen.has(chainId)) problems.push(`${at}.chainId ${chainId} is listed twice`);
    seen.add(chainId);
    const name =
      typeof o['name'] === 'string' && o['name'].length > 0 && o['name'].length <= 64
        ? o['name']
        : (problems.push(`${at}.name must be text of 1 to 64 characters`), '');
    const urls = o['rpcUrls'];
    const rpcUrls: string[] = [];
    if (!Array.isArray(urls) || urls.length === 0 || urls.length > 8) problems.push(`${at}.rpcUrls must be a list of 1 to 8 URLs`);
    else
      urls.forEach((u: unknown, j) => {
        let ok: boolean;
        try {
          const url = typeof u === 'string' ? new URL(u) : undefined;
          // The user-info is sent decoded (Basic authentication): a stray `%` must be written `%25`.
          ok =
            url !== undefined && ['http:', 'https:'].includes(url.protocol) && [url.username, url.password].every((p) => decodeURIComponent(p) !== undefined);
        } catch {
          ok = false;
        }
        if (ok) rpcUrls.push(u as string);
        else problems.push(`${at}.rpcUrls[${j}] must be an http(s) URL (its user-info percent-encoded)`);
      });
    const blockTimeMs = int('blockTimeMs', DEFAULTS.blockTimeMs, 10, 600_000);
    const chain: ChainConfig = {
      chainId,
      name,
      rpcUrls,
      confirmations: int('confirmations', DEFAULTS.confirmations, 1, 1_000),
      maxFeePerGas: wei('maxFeePerGas'),
      maxPriorityFeePerGas: wei('maxPriorityFeePerGas'),
      minPriorityFeePerGas: wei('minPriorityFeePerGas', DEFAULTS.minPriorityFeePerGas),
      blockTimeMs,
      stuckAfterMs: int('stuckAfterMs', 3 * blockTimeMs, 10, 86_400_000),
      replacementBumpPercent: int('replacementBumpPercent', DEFAULTS.replacementBumpPercent, 10, 1_000),
      gasMarginPercent: int('gasMarginPercent', DEFAULTS.gasMarginPercent, 0, 1_000),
      queuedTtlMs: int('queuedTtlMs', DEFAULTS.queuedTtlMs, 1_000, 30 * 86_400_000),
      rpcTimeoutMs: int('rpcTimeoutMs', 5_000, 50, 120_000),
      rpcCooldownMs: int('rpcCooldownMs', 5_000, 10, 600_000),
    };
    if (chain.maxPriorityFeePerGas > chain.maxFeePerGas) problems.push(`${at}.maxPriorityFeePerGas must not exceed maxFeePerGas`);
    if (chain.minPriorityFeePerGas > chain.maxPriorityFeePerGas) problems.push(`${at}.minPriorityFeePerGas must not exceed maxPriorityFeePerGas`);
    chains.push(chain);
  });
  return chains;
}
