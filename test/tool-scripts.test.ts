import { execFile } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { expect } from 'chai';

/**
 * The scripts that build the suites' tools on first use (scripts/*.sh), run against a stand-in
 * `go` that prints what the real one prints (module downloads, and the proxy's 403 for OpenBao)
 * and writes empty binaries: what a person sees on a first run, in a second, not 25 minutes.
 */
const FAKE_GO = `#!/usr/bin/env bash
[ "$1" = env ] && { echo "$FAKE_MODCACHE"; exit 0; }
echo "go: downloading example.com/chatter v1.0.0 ($1)"
echo "go: finding module for package example.com/more-chatter" >&2
case "$1" in
  install)
    pkg="\${@: -1}"; name=$(basename "\${pkg%@*}"); touch "$GOBIN/$name"; chmod +x "$GOBIN/$name" ;;
  get)
    shift
    for a in "$@"; do
      case "$a" in
        *openbao*) echo "go: $a: reading https://proxy.example/github.com/openbao/openbao/@v/v2.4.1.info: 403 Forbidden" >&2; exit 1 ;;
        k8s.io/api@*) printf '\\tk8s.io/api %s.0\\n' "\${a#*@}" >> go.mod ;;
      esac
    done ;;
  build)
    while [ $# -gt 0 ]; do [ "$1" = -o ] && { touch "$2"; chmod +x "$2"; }; shift; done ;;
esac
`;

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

function script(name: string, env: Record<string, string>): Promise<Run> {
  return new Promise((resolve) => {
    execFile('bash', [path.resolve('scripts', name)], { env, timeout: 60_000 }, (err, stdout, stderr) =>
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout, stderr }),
    );
  });
}

describe('tool builds on first use (scripts/*.sh): one line each, the chatter in a log', function () {
  this.timeout(60_000);
  let dir: string;
  let env: Record<string, string>;

  before(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'custody-tools-'));
    const bin = path.join(dir, 'bin');
    mkdirSync(bin);
    // The stand-in `go`, and the three files of Vault's module that openbao.sh patches.
    writeFileSync(path.join(bin, 'go'), FAKE_GO);
    chmodSync(path.join(bin, 'go'), 0o755);
    const modcache = path.join(dir, 'modcache');
    const vault = path.join(modcache, 'github.com/hashicorp/vault@v1.21.4');
    for (const f of ['vault/identity_store.go', 'vault/logical_system_activation_flags.go', 'builtin/logical/transit/path_restore.go']) {
      mkdirSync(path.dirname(path.join(vault, f)), { recursive: true });
      writeFileSync(path.join(vault, f), 'package x\n');
    }
    env = { PATH: `${bin}:${process.env['PATH'] ?? ''}`, HOME: dir, XDG_CACHE_HOME: path.join(dir, 'cache'), FAKE_MODCACHE: modcache };
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  for (const [file, tool, minutes, binary] of [
    ['kube-score.sh', 'kube-score v1.20.0', '1', 'custody-kube-score/v1.20.0/kube-score'],
    ['helm.sh', 'helm v3.19.5', '5', 'custody-helm/v3.19.5-k8s1.34/helm'],
    ['promtool.sh', 'promtool v0.316.0', '25', 'custody-promtool/v0.316.0/promtool'],
  ] as const) {
    it(`${file}: one line on the first run, none on the next; stdout only the path`, async () => {
      const first = await script(file, env);
      expect(first.code, first.stderr).to.equal(0);
      const log = path.join(env['XDG_CACHE_HOME'] ?? '', path.dirname(binary), 'build.log');
      expect(first.stderr).to.equal(`building ${tool} (first use, ~${minutes} min); log: ${log}\n`);
      expect(first.stdout).to.equal(`${path.join(env['XDG_CACHE_HOME'] ?? '', binary)}\n`);
      expect(readFileSync(log, 'utf8')).to.include('go: downloading example.com/chatter');
      const again = await script(file, env);
      expect(again).to.deep.include({ code: 0, stderr: '', stdout: first.stdout });
    });
  }

  it('kube-strict.sh: one line for every missing decoder', async () => {
    const run = await script('kube-strict.sh', { ...env, KUBE_STRICT_VERSIONS: '1.31 1.33' });
    expect(run.code, run.stderr).to.equal(0);
    expect(run.stderr).to.match(/^building kube-strict \(Kubernetes 1\.31 1\.33\) \(first use, ~5 min\); log: \S+\/build\.log\n$/);
    const out = run.stdout.trim();
    expect(readFileSync(path.join(out, 'build.log'), 'utf8')).to.include('k8s.io/api v0.33.0');
    expect((await script('kube-strict.sh', { ...env, KUBE_STRICT_VERSIONS: '1.31 1.33' })).stderr).to.equal('');
  });

  it('openbao.sh: the OpenBao attempt and its 403 stay in the log; one line says Vault is the fallback', async () => {
    const run = await script('openbao.sh', env);
    expect(run.code, run.stderr).to.equal(0);
    const log = path.join(env['XDG_CACHE_HOME'] ?? '', 'custody-vault-api', 'build.log');
    expect(run.stderr).to.equal(
      `building the Vault-API server for the tests (OpenBao v2.4.1, else HashiCorp Vault v1.21.4) (first use, ~25 min); log: ${log}\n`,
    );
    expect(run.stderr).not.to.include('403');
    expect(run.stdout).to.equal(`${path.join(env['XDG_CACHE_HOME'] ?? '', 'custody-vault-api', 'vault-v1.21.4', 'vault')}\n`);
    const text = readFileSync(log, 'utf8');
    expect(text).to.include('403 Forbidden');
    expect(text).to.include('building HashiCorp Vault v1.21.4 (same API) instead');
  });
});
