import { useEffect, useState } from 'preact/hooks';
import { api, ApiError } from '../api.js';
import type { PageProps } from '../main.js';
import { ErrorBox, Field, Form, Json, Loading, PagedList, Select, useLoad, when } from '../ui.js';
import type { EvaluateOut as Decision, OwnersOut as Owners, PolicyVersionOut as Version } from '../types.js';

/** The newest version, or none (a project without a policy signs nothing). */
async function newest(project: number): Promise<Version | null> {
  try {
    return await api<Version>('GET', `/api/v1/project/${project}/policy`);
  } catch (err) {
    if (err instanceof ApiError && err.problem.status === 404) return null;
    throw err;
  }
}

/** JSON typed by hand, parsed before it is sent: a syntax error is said here, a policy error by the service. */
function parsed(text: string, what: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch (err) {
    throw new ApiError({ status: 0, title: `The ${what} is not JSON`, detail: (err as Error).message });
  }
}

function Compare({ project }: { project: number }) {
  const versions = useLoad(
    () => api<{ versions: Version[] }>('GET', `/api/v1/project/${project}/policy/versions?limit=100`).then((b) => b.versions),
    [project],
  );
  const [left, setLeft] = useState('');
  const [right, setRight] = useState('');
  if (versions.status === 'loading') return <Loading what="the versions" />;
  if (versions.status === 'error') return <ErrorBox error={versions.error} />;
  const list = versions.data;
  if (list.length < 2) return <p class="empty">Two versions are needed to compare.</p>;
  const options = list.map((v): [string, string] => [String(v.version), `version ${v.version} (${when(v.createdAt)})`]);
  const a = list.find((v) => String(v.version) === (left || String(list[list.length - 2]?.version)));
  const b = list.find((v) => String(v.version) === (right || String(list[list.length - 1]?.version)));
  return (
    <section aria-label="Compare versions">
      <h3>Side by side</h3>
      <div class="side">
        <div>
          <Select label="Left" value={String(a?.version ?? '')} options={options} onChange={setLeft} />
          <Json value={a?.policy} />
        </div>
        <div>
          <Select label="Right" value={String(b?.version ?? '')} options={options} onChange={setRight} />
          <Json value={b?.policy} />
        </div>
      </div>
    </section>
  );
}

export function PolicyPage({ place, can }: PageProps) {
  const project = place.project as number;
  const current = useLoad(() => newest(project), [project]);
  const owners = useLoad(() => api<Owners>('GET', `/api/v1/project/${project}/policy/owners`), [project]);
  const [text, setText] = useState('');
  const [signed, setSigned] = useState('');
  const [operation, setOperation] = useState('{\n  "caller": "server",\n  "method": "personal_sign",\n  "params": { "message": "hello" }\n}');
  const [decision, setDecision] = useState<Decision | null>(null);
  const [refresh, setRefresh] = useState(0);
  useEffect(() => {
    if (current.status === 'ok') setText(JSON.stringify(current.data?.policy ?? { rules: [] }, null, 2));
  }, [current.status]);
  const ownerSigned = owners.status === 'ok' && owners.data.keys.length > 0;
  const base = current.status === 'ok' ? (current.data?.version ?? 0) : 0;
  return (
    <>
      <section aria-label="Owners">
        <h2>Owners</h2>
        {owners.status === 'loading' ? <Loading what="the owners" /> : null}
        {owners.status === 'error' ? <ErrorBox error={owners.error} /> : null}
        {owners.status === 'ok' ? (
          owners.data.keys.length === 0 ? (
            <p>No owners: the project's admin tokens write its policy.</p>
          ) : (
            <>
              <p>
                Owner-signed: every change must be a JWS signed by one of these keys over the project's id, the new version and the policy. The service (and the
                signer, which checks it again) refuses an unsigned change, whatever token sends it.
              </p>
              <ul>
                {owners.data.keys.map((k) => (
                  <li key={k.x}>
                    <code>{k.kid ?? k.x}</code>
                  </li>
                ))}
              </ul>
            </>
          )
        ) : null}
      </section>
      <section aria-label="Current policy">
        <h2>Current policy</h2>
        {current.status === 'loading' ? <Loading what="the policy" /> : null}
        {current.status === 'error' ? <ErrorBox error={current.error} /> : null}
        {current.status === 'ok' && current.data === null ? <p class="empty">No policy: this project signs nothing (default deny).</p> : null}
        {current.status === 'ok' && current.data ? (
          <p>
            Version {current.data.version} by {current.data.author ?? 'unknown'}, {when(current.data.createdAt)}
          </p>
        ) : null}
        {can('policy.write') ? (
          ownerSigned ? (
            <Form
              label="Write an owner-signed version"
              submit="Save signed version"
              run={() => api('PUT', `/api/v1/project/${project}/policy?ifVersion=${base}`, { signed: signed.trim() })}
              onDone={() => {
                current.reload();
                setRefresh((n) => n + 1);
              }}
            >
              <Field label="Signed policy (compact JWS)" value={signed} onInput={setSigned} area rows={4} required />
            </Form>
          ) : (
            <Form
              label="Edit the policy"
              submit="Save new version"
              run={() => api('PUT', `/api/v1/project/${project}/policy?ifVersion=${base}`, parsed(text, 'policy'))}
              onDone={() => {
                current.reload();
                setRefresh((n) => n + 1);
              }}
            >
              <Field label="Policy (JSON)" value={text} onInput={setText} area rows={16} />
            </Form>
          )
        ) : current.status === 'ok' && current.data ? (
          <Json value={current.data.policy} />
        ) : null}
      </section>
      <section aria-label="Dry run">
        <h2>Dry run</h2>
        <Form
          label="Evaluate an operation"
          submit="Evaluate"
          run={() => api<Decision>('POST', `/api/v1/project/${project}/policy/evaluate`, parsed(operation, 'operation'))}
          onDone={(d) => setDecision(d as Decision)}
        >
          <Field label="Operation (JSON: caller, method, params)" value={operation} onInput={setOperation} area rows={8} />
        </Form>
        {decision ? (
          <p role="status" class={decision.allowed ? 'ok' : 'bad'}>
            {decision.allowed ? `Allowed by rule “${decision.rule ?? ''}”` : 'Denied: no rule allows it'} (policy version {decision.policyVersion}; digest{' '}
            <code>{decision.digest}</code>)
          </p>
        ) : null}
      </section>
      <section aria-label="Versions">
        <h2>Versions</h2>
        <PagedList<Version>
          caption="Policy versions"
          path={`/api/v1/project/${project}/policy/versions`}
          itemsKey="versions"
          rowKey={(v) => v.version}
          refresh={refresh}
          empty="No versions yet."
          columns={[
            { label: 'Version', render: (v) => v.version },
            { label: 'Author', render: (v) => v.author ?? '—' },
            { label: 'Written', render: (v) => when(v.createdAt) },
            { label: 'Rules', render: (v) => ((v.policy as { rules?: unknown[] }).rules ?? []).length },
          ]}
        />
        <Compare key={refresh} project={project} />
      </section>
    </>
  );
}
