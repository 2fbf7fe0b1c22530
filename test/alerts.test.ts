import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { parse as parseYaml, parseAllDocuments, stringify } from 'yaml';
import { PrometheusRule } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/PrometheusRule';
import { ConfigMap } from 'kubernetes-models/v1/ConfigMap';
import { startApp } from './support/app.js';
import { toolPath } from './support/tools.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const CHART = path.join(ROOT, 'helm/custody');
// The least a render needs (the chart has no default audience or Vault address).
const REQUIRED = path.join(ROOT, 'helm/ci/required.yaml');
const RULES_FILE = path.join(CHART, 'files/alerts.yaml');
const DASHBOARD_FILE = path.join(CHART, 'files/dashboard.json');
const RULE_TESTS = path.join(ROOT, 'test/alerts/alerts.test.yaml');
const OPERATIONS = path.join(ROOT, 'docs/operations.md');
const RUNBOOKS = 'https://github.com/custody/custody/blob/main/docs/operations.md';

// Rendered manifests are plain YAML objects; each assertion says which fields it reads.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Manifest = any;

interface Rule {
  alert?: string;
  record?: string;
  expr: string;
  for?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}
interface Groups {
  groups: Array<{ name: string; rules: Rule[] }>;
}
interface Panel {
  type: string;
  title: string;
  targets?: Array<{ expr: string; refId: string }>;
}

const rulesFile = (): Groups => parseYaml(readFileSync(RULES_FILE, 'utf8')) as Groups;
const rules = (): Rule[] => rulesFile().groups.flatMap((g) => g.rules);
const alertNames = () => [...new Set(rules().flatMap((r) => (r.alert ? [r.alert] : [])))];
const dashboardExprs = (): Array<{ title: string; expr: string }> =>
  (JSON.parse(readFileSync(DASHBOARD_FILE, 'utf8')) as { panels: Panel[] }).panels.flatMap((p) =>
    (p.targets ?? []).map((t) => ({ title: p.title, expr: t.expr })),
  );
/** Grafana's variables, as Prometheus would see them once Grafana fills them in. */
const grafanaFilled = (expr: string) => expr.replaceAll('$__rate_interval', '5m').replaceAll('$namespace', '.*');

/** GitHub's anchor of a Markdown heading. */
const slug = (heading: string) =>
  heading
    .trim()
    .toLowerCase()
    .replace(/[^a-z0-9 _-]/g, '')
    .replace(/ /g, '-');

/** The metric names an expression reads (a histogram's series named by the histogram), and the recorded series it reads. */
function namesIn(expr: string): { metrics: string[]; recorded: string[] } {
  // Label matchers, strings and durations are not names.
  const bare = expr.replace(/\{[^}]*\}/g, '').replace(/"[^"]*"/g, '');
  const words = [...bare.matchAll(/[a-zA-Z_:][a-zA-Z0-9_:]*/g)].map((m) => m[0]);
  return {
    metrics: [...new Set(words.filter((w) => w.startsWith('custody_')).map((w) => w.replace(/_(bucket|sum|count)$/, '')))],
    recorded: [...new Set(words.filter((w) => w.startsWith('custody:')))],
  };
}

describe('alerting: the rules, their tests with promtool, the PrometheusRule, the runbooks and the dashboard', function () {
  this.timeout(300_000);
  let promtool: string;
  let helm: string;
  let dir: string;

  before(function () {
    // A fresh machine builds promtool first (scripts/promtool.sh: about 25 minutes on two cores).
    this.timeout(45 * 60_000);
    promtool = toolPath('promtool');
    helm = toolPath('helm');
    dir = mkdtempSync(path.join(tmpdir(), 'custody-alerts-'));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  const run = (args: string[], cwd = ROOT) => spawnSync(promtool, args, { cwd, encoding: 'utf8' });

  it('promtool check rules accepts the rules file (no lint finding)', () => {
    const res = run(['check', 'rules', '--lint=all', '--lint-fatal', RULES_FILE]);
    expect(res.status, res.stdout + res.stderr).to.equal(0);
    expect(res.stdout).to.include(`SUCCESS: ${rules().length} rules found`);
  });

  it('promtool test rules: every alert fires on its synthetic series and stays quiet on healthy ones', () => {
    const res = run(['test', 'rules', path.basename(RULE_TESTS)], path.dirname(RULE_TESTS));
    expect(res.status, res.stdout + res.stderr).to.equal(0);
    expect(res.stdout).to.include('SUCCESS');
    // Each alert has a case where it fires and one where it must not.
    const tests = (parseYaml(readFileSync(RULE_TESTS, 'utf8')) as { tests: Array<{ alert_rule_test?: Array<{ alertname: string; exp_alerts?: unknown[] }> }> })
      .tests;
    const cases = tests.flatMap((t) => t.alert_rule_test ?? []);
    for (const name of alertNames()) {
      expect(
        cases.some((c) => c.alertname === name && (c.exp_alerts ?? []).length > 0),
        `${name} fires in a test`,
      ).to.equal(true);
      expect(
        cases.some((c) => c.alertname === name && (c.exp_alerts ?? []).length === 0),
        `${name} stays quiet in a test`,
      ).to.equal(true);
    }
    expect(alertNames()).to.have.length.greaterThan(10);
  });

  it('every alert has a severity, a summary, a description and a runbook_url at its own section of docs/operations.md "Alerts and runbooks"', () => {
    const doc = readFileSync(OPERATIONS, 'utf8');
    const section = doc.slice(doc.indexOf('\n## Alerts and runbooks\n'));
    expect(section.length, 'the section exists').to.be.greaterThan(100);
    const body = section.slice(1, section.indexOf('\n## ', 1) > 0 ? section.indexOf('\n## ', 1) : undefined);
    const anchors = [...body.matchAll(/^### (.+)$/gm)].map((m) => slug(m[1] ?? ''));
    for (const r of rules().filter((x) => x.alert)) {
      expect(r.labels?.['severity'], r.alert).to.be.oneOf(['critical', 'warning']);
      expect(r.annotations?.['summary'], r.alert).to.be.a('string').and.not.equal('');
      expect(r.annotations?.['description'], r.alert).to.be.a('string').and.not.equal('');
      const url = r.annotations?.['runbook_url'] ?? '';
      expect(url, r.alert).to.equal(`${RUNBOOKS}#${slug(r.alert ?? '')}`);
      expect(anchors, `a runbook section for ${r.alert}`).to.include(url.split('#')[1]);
    }
    // Each runbook says what the alert means, what to check and what to do; its links to others resolve.
    for (const part of body.split(/^### /m).slice(1)) {
      const name = part.split('\n')[0] ?? '';
      expect(alertNames(), `a runbook of no alert: ${name}`).to.include(name);
      for (const heading of ['**Means:**', '**Check:**', '**Do:**']) expect(part, `${name}: ${heading}`).to.include(heading);
      for (const [, anchor] of part.matchAll(/\]\(#([a-z0-9-]+)\)/g)) expect(anchors, `${name} links to #${anchor}`).to.include(anchor);
    }
  });

  it("every metric the rules and the dashboard read is in the service's /metrics (real app, real PostgreSQL) and in the table of docs/operations.md; recorded series are recorded by the rules", async () => {
    const app = await startApp();
    let scraped: string;
    try {
      const res = await fetch(`${app.url}/metrics`);
      expect(res.status).to.equal(200);
      scraped = await res.text();
    } finally {
      await app.close();
    }
    const served = new Set([...scraped.matchAll(/^# HELP (\S+) /gm)].map((m) => m[1]));
    const doc = readFileSync(OPERATIONS, 'utf8');
    const metricsSection = doc.slice(doc.indexOf('\n## Metrics\n'), doc.indexOf('\n## Alerts and runbooks\n'));
    const documented = new Set([...metricsSection.matchAll(/^\| `(custody_[a-z0-9_]+)` \|/gm)].map((m) => m[1]));
    const recordedByRules = new Set(rules().flatMap((r) => (r.record ? [r.record] : [])));
    const exprs = [
      ...rules().map((r) => ({ where: r.alert ?? r.record ?? '', expr: r.expr })),
      ...dashboardExprs().map((d) => ({ where: `panel ${d.title}`, expr: d.expr })),
    ];
    let read = 0;
    for (const { where, expr } of exprs) {
      const { metrics, recorded } = namesIn(expr);
      for (const m of metrics) {
        read++;
        expect(served.has(m), `${where}: ${m} on /metrics`).to.equal(true);
        // prom-client's process metrics are documented as a family.
        if (!/^custody_(process|nodejs)_/.test(m)) expect(documented.has(m), `${where}: ${m} in the table`).to.equal(true);
      }
      for (const r of recorded) expect(recordedByRules.has(r), `${where}: ${r} recorded`).to.equal(true);
    }
    expect(read).to.be.greaterThan(30);
    // And the table names nothing the service does not serve.
    for (const m of documented) expect(served.has(m), `documented ${m} on /metrics`).to.equal(true);
  });

  it("the PrometheusRule (prometheusRule.enabled) is valid and holds exactly the file's groups; off by default; runbookBaseUrl moves only the links", () => {
    const template = (...set: string[]) => {
      const res = spawnSync(helm, ['template', 'rel', CHART, '--namespace', 'custody', '-f', REQUIRED, ...set.flatMap((s) => ['--set', s])], {
        encoding: 'utf8',
      });
      expect(res.status, res.stderr).to.equal(0);
      return parseAllDocuments(res.stdout)
        .map((d): Manifest => d.toJS())
        .filter((m) => m !== null);
    };
    expect(template().filter((m) => m.kind === 'PrometheusRule')).to.deep.equal([]);
    const [rule, ...more] = template('prometheusRule.enabled=true', 'prometheusRule.labels.release=kube-prometheus-stack').filter(
      (m) => m.kind === 'PrometheusRule',
    );
    expect(more).to.deep.equal([]);
    expect(() => new PrometheusRule(rule).validate()).not.to.throw();
    expect(rule.metadata.labels).to.include({ release: 'kube-prometheus-stack', 'app.kubernetes.io/component': 'alerts' });
    expect(rule.spec).to.deep.equal({ groups: rulesFile().groups });
    const [moved] = template('prometheusRule.enabled=true', 'prometheusRule.runbookBaseUrl=https://wiki.example.com/custody/operations').filter(
      (m) => m.kind === 'PrometheusRule',
    );
    const expected = JSON.parse(JSON.stringify(rulesFile().groups).replaceAll(RUNBOOKS, 'https://wiki.example.com/custody/operations'));
    expect(moved.spec.groups).to.deep.equal(expected);
    // As promtool reads a rules file, the rendered groups pass too.
    const file = path.join(dir, 'rendered.yaml');
    writeFileSync(file, stringify({ groups: rule.spec.groups }));
    const res = run(['check', 'rules', file]);
    expect(res.status, res.stdout + res.stderr).to.equal(0);
  });

  it('every query of the Grafana dashboard parses (promtool check rules over them); grafanaDashboard.enabled ships it as a labelled ConfigMap', () => {
    const exprs = dashboardExprs();
    expect(exprs.length).to.be.greaterThan(15);
    const file = path.join(dir, 'dashboard-queries.yaml');
    writeFileSync(
      file,
      stringify({ groups: [{ name: 'dashboard', rules: exprs.map((e, i) => ({ record: `dashboard:query_${i}`, expr: grafanaFilled(e.expr) })) }] }),
    );
    const res = run(['check', 'rules', file]);
    expect(res.status, res.stdout + res.stderr).to.equal(0);
    expect(res.stdout).to.include(`SUCCESS: ${exprs.length} rules found`);
    // A query that does not parse is refused the same way (the check is not vacuous).
    writeFileSync(file, stringify({ groups: [{ name: 'dashboard', rules: [{ record: 'dashboard:broken', expr: 'sum by (kind (custody_outbox_depth)' }] }] }));
    expect(run(['check', 'rules', file]).status).to.not.equal(0);

    const rendered = spawnSync(helm, ['template', 'rel', CHART, '--namespace', 'custody', '-f', REQUIRED, '--set', 'grafanaDashboard.enabled=true'], {
      encoding: 'utf8',
    });
    expect(rendered.status, rendered.stderr).to.equal(0);
    const maps = parseAllDocuments(rendered.stdout)
      .map((d): Manifest => d.toJS())
      .filter((m) => m?.kind === 'ConfigMap');
    expect(maps).to.have.length(1);
    expect(() => new ConfigMap(maps[0]).validate()).not.to.throw();
    expect(maps[0].metadata.labels).to.include({ grafana_dashboard: '1' });
    expect(maps[0].data['custody.json']).to.equal(readFileSync(DASHBOARD_FILE, 'utf8'));
  });
});
