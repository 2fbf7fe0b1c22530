import { useState } from 'preact/hooks';
import { api } from '../api.js';
import type { PageProps } from '../main.js';
import { ErrorBox, Field, Form, Loading, PagedList, useLoad, when } from '../ui.js';
import type { AuditEntryOut as Entry, AuditVerification as Verification } from '../types.js';

function ChainStatus({ org }: { org: number }) {
  const v = useLoad(() => api<Verification>('GET', `/api/v1/organisations/${org}/audit/verification`), [org]);
  return (
    <section class="status" aria-label="Chain verification">
      <h2>Chain</h2>
      {v.status === 'loading' ? <Loading what="the verification" /> : null}
      {v.status === 'error' ? <ErrorBox error={v.error} /> : null}
      {v.status === 'ok' ? (
        <dl>
          <dt>Verification</dt>
          <dd class={v.data.ok ? 'ok' : 'bad'}>
            {v.data.ok
              ? `verified: ${v.data.rows} newest rows, ${v.data.checkpoints} checkpoint heads among them`
              : `does not verify: ${v.data.problem?.message ?? ''}`}
          </dd>
          <dt>Last checkpoint</dt>
          <dd>{v.data.lastCheckpoint ? `${v.data.lastCheckpoint.size} rows, signed ${when(v.data.lastCheckpoint.time)}` : 'none yet'}</dd>
          <dt>Waiting to be sealed</dt>
          <dd>{v.data.unsealed}</dd>
        </dl>
      ) : null}
      <p class="hint">The service checks its own chain here; an auditor verifies an export with `custody audit verify`.</p>
    </section>
  );
}

export function AuditPage({ place }: PageProps) {
  const org = place.organisation as number;
  const [actor, setActor] = useState('');
  const [action, setAction] = useState('');
  const [target, setTarget] = useState('');
  const [from, setFrom] = useState('');
  const [to, setTo] = useState('');
  const [query, setQuery] = useState<Record<string, string>>({});
  const iso = (local: string) => (local ? new Date(local).toISOString() : '');
  return (
    <>
      <ChainStatus org={org} />
      <Form
        label="Filter the audit log"
        submit="Filter"
        run={() => {
          setQuery(Object.fromEntries(Object.entries({ actor, action, target, from: iso(from), to: iso(to) }).filter(([, v]) => v.trim() !== '')));
          return Promise.resolve();
        }}
      >
        <Field label="Actor" value={actor} onInput={setActor} placeholder="operator or token:12" />
        <Field label="Action begins with" value={action} onInput={setAction} placeholder="POST /api/v1/organisations" />
        <Field label="Target" value={target} onInput={setTarget} />
        <Field label="From" type="datetime-local" value={from} onInput={setFrom} />
        <Field label="To" type="datetime-local" value={to} onInput={setTo} />
      </Form>
      <PagedList<Entry>
        caption="Audit log"
        path={`/api/v1/organisations/${org}/audit`}
        query={query}
        itemsKey="entries"
        rowKey={(e) => e.id}
        empty="No entries match."
        columns={[
          { label: 'Id', render: (e) => e.id },
          { label: 'At', render: (e) => when(e.at) },
          { label: 'Actor', render: (e) => e.actor },
          { label: 'Action', render: (e) => <code>{e.action}</code> },
          { label: 'Target', render: (e) => e.target ?? '—' },
          { label: 'Status', render: (e) => e.status ?? '—' },
        ]}
      />
    </>
  );
}
