import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const SCRIPTS = fileURLToPath(new URL('../../../scripts/', import.meta.url));

/** The tools the suites need beyond Node, each from `$<ENV>` or its script (the one CI uses too). */
const TOOLS = {
  vault: { env: 'VAULT_BIN', script: 'openbao.sh' },
  helm: { env: 'HELM_BIN', script: 'helm.sh' },
  chromium: { env: 'CHROMIUM_BIN', script: 'chromium.sh' },
  'kube-score': { env: 'KUBE_SCORE_BIN', script: 'kube-score.sh' },
  /** A directory of `kube-strict-<minor>` binaries, one per Kubernetes version the chart supports. */
  'kube-strict': { env: 'KUBE_STRICT_DIR', script: 'kube-strict.sh' },
  /** Prometheus' promtool: checks and unit-tests the chart's rules. */
  promtool: { env: 'PROMTOOL_BIN', script: 'promtool.sh' },
  /** ORY Hydra: a second, real OpenID provider. */
  hydra: { env: 'HYDRA_BIN', script: 'hydra.sh' },
} as const;

export type Tool = keyof typeof TOOLS;

/**
 * The path of a tool, built or installed on first use by its script (progress on stderr, cached
 * afterwards), so that a fresh clone's `npm test` needs nothing `.ci/run` would have done first.
 */
export function toolPath(tool: Tool): string {
  const { env, script } = TOOLS[tool];
  const given = process.env[env];
  if (given) return given;
  const path = execFileSync('bash', [`${SCRIPTS}${script}`], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] }).trim();
  process.env[env] = path;
  return path;
}
