import { useState } from 'preact/hooks';
import { api } from '../api.js';
import type { PageProps } from '../main.js';
import { Action, ErrorBox, Field, Form, Loading, PagedList, Select, useLoad, when } from '../ui.js';
import type { TransactionOut as Transaction } from '../types.js';

const STATUSES = ['', 'queued', 'signed', 'submitted', 'mined', 'confirmed', 'failed', 'replaced', 'cancelled', 'expired'];
const TERMINAL = ['confirmed', 'failed', 'replaced', 'cancelled', 'expired'];

const gwei = (wei: string): string => `${(Number(wei) / 1e9).toLocaleString('en', { maximumFractionDigits: 3 })} gwei`;

function Detail({ project, id, can, onChanged }: { project: number; id: number; can: (a: string) => boolean; onChanged: () => void }) {
  const t = useLoad(() => api<Transaction>('GET', `/api/v1/project/${project}/transactions/${id}`), [project, id]);
  if (t.status === 'loading') return <Loading what="the transaction" />;
  if (t.status === 'error') return <ErrorBox error={t.error} />;
  const x = t.data;
  const changed = () => {
    t.reload();
    onChanged();
  };
  return (
    <section class="detail" aria-label={`Transaction ${x.id}`}>
      <h2>Transaction {x.id}</h2>
      <dl>
        <dt>Status</dt>
        <dd>
          {x.status}
          {x.waiting ? ` (waiting: ${x.waiting})` : ''}
        </dd>
        <dt>From → to</dt>
        <dd>
          <code>{x.from}</code> → <code>{x.to ?? '(contract creation)'}</code>
        </dd>
        <dt>Value</dt>
        <dd>{x.value} wei</dd>
        <dt>Nonce</dt>
        <dd>{x.nonce ?? '—'}</dd>
        <dt>Hash</dt>
        <dd>
          <code>{x.hash ?? '—'}</code>
        </dd>
        <dt>Block</dt>
        <dd>{x.blockNumber ?? '—'}</dd>
        <dt>Times</dt>
        <dd>
          accepted {when(x.createdAt)}, submitted {when(x.submittedAt)}, last change {when(x.updatedAt)}
        </dd>
        {x.error ? (
          <>
            <dt>Error</dt>
            <dd>
              {x.error.code}: {x.error.message}
            </dd>
          </>
        ) : null}
      </dl>
      {can('transaction.send') && !TERMINAL.includes(x.status) ? (
        <div class="buttons">
          <Action label="Speed up" run={() => api('POST', `/api/v1/project/${project}/transactions/${id}/speed-up`)} onDone={changed} />
          <Action
            label="Cancel"
            kind="danger"
            confirm="Cancel this transaction? A no-op replacement takes its nonce."
            run={() => api('POST', `/api/v1/project/${project}/transactions/${id}/cancel`)}
            onDone={changed}
          />
        </div>
      ) : null}
      <h3>Events</h3>
      {x.events && x.events.length > 0 ? (
        <ol>
          {x.events.map((e) => (
            <li key={e.sequence} value={e.sequence}>
              {e.type}
            </li>
          ))}
        </ol>
      ) : (
        <p class="empty">No events yet.</p>
      )}
      <h3>Signed attempts</h3>
      {x.attempts && x.attempts.length > 0 ? (
        <table>
          <caption>Signed attempts</caption>
          <thead>
            <tr>
              <th scope="col">Hash</th>
              <th scope="col">Purpose</th>
              <th scope="col">Nonce</th>
              <th scope="col">Max fee</th>
              <th scope="col">Priority fee</th>
              <th scope="col">Gas</th>
              <th scope="col">Status</th>
              <th scope="col">Broadcast</th>
            </tr>
          </thead>
          <tbody>
            {x.attempts.map((a) => (
              <tr key={a.hash}>
                <td>
                  <code>{a.hash}</code>
                </td>
                <td>{a.purpose}</td>
                <td>{a.nonce}</td>
                <td>{gwei(a.maxFeePerGas)}</td>
                <td>{gwei(a.maxPriorityFeePerGas)}</td>
                <td>{a.gas}</td>
                <td>{a.status}</td>
                <td>{when(a.broadcastAt)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : (
        <p class="empty">Nothing signed yet.</p>
      )}
    </section>
  );
}

export function TransactionsPage({ place, can }: PageProps) {
  const project = place.project as number;
  const [wallet, setWallet] = useState('');
  const [chain, setChain] = useState('');
  const [status, setStatus] = useState('');
  const [query, setQuery] = useState<Record<string, string>>({});
  const [open, setOpen] = useState<number | null>(null);
  const [refresh, setRefresh] = useState(0);
  return (
    <>
      <Form
        label="Filter transactions"
        submit="Filter"
        run={() => {
          setQuery(Object.fromEntries(Object.entries({ walletId: wallet.trim(), chainId: chain.trim(), status }).filter(([, v]) => v !== '')));
          return Promise.resolve();
        }}
      >
        <Field label="Wallet id" value={wallet} onInput={setWallet} />
        <Field label="Chain id" value={chain} onInput={setChain} />
        <Select label="Status" value={status} onChange={setStatus} options={STATUSES.map((s): [string, string] => [s, s || 'any'])} />
      </Form>
      <PagedList<Transaction>
        caption="Transactions"
        path={`/api/v1/project/${project}/transactions`}
        query={query}
        itemsKey="transactions"
        rowKey={(t) => t.id}
        refresh={refresh}
        empty="No transactions match."
        columns={[
          { label: 'Id', render: (t) => t.id },
          { label: 'Wallet', render: (t) => t.walletId },
          { label: 'Chain', render: (t) => t.chainId },
          { label: 'Status', render: (t) => t.status },
          { label: 'Nonce', render: (t) => t.nonce ?? '—' },
          { label: 'Hash', render: (t) => (t.hash ? <code>{`${t.hash.slice(0, 10)}…`}</code> : '—') },
          { label: 'Accepted', render: (t) => when(t.createdAt) },
          {
            label: 'Details',
            render: (t) => (
              <button type="button" onClick={() => setOpen(t.id)}>
                Open {t.id}
              </button>
            ),
          },
        ]}
      />
      {open !== null ? <Detail project={project} id={open} can={can} onChanged={() => setRefresh((n) => n + 1)} /> : null}
    </>
  );
}
