import { useState } from 'preact/hooks';
import { api } from '../api.js';
import type { PageProps } from '../main.js';
import { Action, Check, Field, Form, PagedList, when } from '../ui.js';
import type { MembershipOut as Membership } from '../types.js';

type Filter = { walletAddress?: string; membershipType?: string; includeRevoked?: boolean; includeExpired?: boolean };

function Transfer({ project, m, onDone }: { project: number; m: Membership; onDone: () => void }) {
  const [to, setTo] = useState('');
  return (
    <Form
      label={`Transfer membership ${m.tokenId}`}
      submit="Transfer"
      run={() => api('POST', `/api/v1/membership/transfer?projectId=${project}`, { from: m.walletAddress, to, tokenId: m.tokenId })}
      onDone={onDone}
    >
      <Field label={`New holder of ${m.tokenId}`} value={to} onInput={setTo} placeholder="0x…" required />
    </Form>
  );
}

export function MembershipList({ project, filter, can, refresh }: { project: number; filter: Filter; can: (a: string) => boolean; refresh?: number }) {
  const [again, setAgain] = useState(0);
  const [moving, setMoving] = useState<string | null>(null);
  const done = () => {
    setMoving(null);
    setAgain((n) => n + 1);
  };
  return (
    <PagedList<Membership>
      caption="Memberships"
      path="/api/v1/membership/view"
      query={{ projectId: project, ...filter }}
      itemsKey="memberships"
      rowKey={(m) => m.tokenId}
      refresh={(refresh ?? 0) + again}
      empty="No memberships match."
      columns={[
        { label: 'Token id', render: (m) => m.tokenId },
        { label: 'Type', render: (m) => m.membershipType },
        { label: 'Holder', render: (m) => <code>{m.walletAddress}</code> },
        { label: 'Status', render: (m) => m.status },
        { label: 'Expires', render: (m) => (m.expiration ? when(new Date(m.expiration * 1000).toISOString()) : 'never') },
        { label: 'Transferable', render: (m) => (m.transferable ? 'yes' : 'no') },
        {
          label: 'Actions',
          render: (m) =>
            can('membership.write') && m.status === 'active' ? (
              <>
                <Action
                  label="Revoke"
                  kind="danger"
                  confirm={`Revoke membership ${m.tokenId}?`}
                  run={() => api('POST', `/api/v1/membership/revoke?projectId=${project}`, { tokenId: m.tokenId })}
                  onDone={done}
                />
                {m.transferable ? (
                  moving === m.tokenId ? (
                    <Transfer project={project} m={m} onDone={done} />
                  ) : (
                    <button type="button" onClick={() => setMoving(m.tokenId)}>
                      Transfer
                    </button>
                  )
                ) : null}
              </>
            ) : null,
        },
      ]}
    />
  );
}

function Issue({ project, onDone }: { project: number; onDone: () => void }) {
  const [type, setType] = useState('');
  const [address, setAddress] = useState('');
  const [expires, setExpires] = useState('');
  const [transferable, setTransferable] = useState(true);
  return (
    <Form
      label="Issue a membership"
      submit="Issue membership"
      run={() =>
        api('POST', `/api/v1/membership/issue?projectId=${project}`, [
          { membershipType: type, walletAddress: address, transferable, ...(expires ? { expiration: Math.floor(new Date(expires).getTime() / 1000) } : {}) },
        ])
      }
      onDone={onDone}
    >
      <Field label="Membership type" value={type} onInput={setType} placeholder="gym:gold" required />
      <Field label="Wallet address" value={address} onInput={setAddress} placeholder="0x…" required />
      <Field label="Expires (optional)" type="date" value={expires} onInput={setExpires} />
      <Check label="Transferable" checked={transferable} onChange={setTransferable} />
    </Form>
  );
}

export function MembershipsPage({ place, can }: PageProps) {
  const project = place.project as number;
  const [address, setAddress] = useState('');
  const [type, setType] = useState('');
  const [revoked, setRevoked] = useState(false);
  const [expired, setExpired] = useState(false);
  const [filter, setFilter] = useState<Filter>({});
  const [refresh, setRefresh] = useState(0);
  return (
    <>
      {can('membership.write') ? (
        <details>
          <summary>Issue a membership</summary>
          <Issue project={project} onDone={() => setRefresh((n) => n + 1)} />
        </details>
      ) : null}
      <Form
        label="Filter memberships"
        submit="Filter"
        run={() => {
          setFilter({
            ...(address.trim() ? { walletAddress: address.trim() } : {}),
            ...(type.trim() ? { membershipType: type.trim() } : {}),
            includeRevoked: revoked,
            includeExpired: expired,
          });
          return Promise.resolve();
        }}
      >
        <Field label="Wallet address" value={address} onInput={setAddress} placeholder="0x…" />
        <Field label="Membership type" value={type} onInput={setType} />
        <Check label="Include revoked" checked={revoked} onChange={setRevoked} />
        <Check label="Include expired" checked={expired} onChange={setExpired} />
      </Form>
      <MembershipList project={project} filter={filter} can={can} refresh={refresh} />
    </>
  );
}
