import { useState } from 'preact/hooks';
import { api } from '../api.js';
import type { PageProps } from '../main.js';
import { Action, Check, Field, Form, PagedList, Select, ShownOnce, when } from '../ui.js';
import type { TokenList } from '../types.js';
type Token = TokenList['tokens'][number];

export function TokensPage({ place, can }: PageProps) {
  const org = place.organisation;
  const [name, setName] = useState('');
  const [role, setRole] = useState('read');
  const [project, setProject] = useState('');
  const [showRevoked, setShowRevoked] = useState(false);
  const [refresh, setRefresh] = useState(0);
  const [created, setCreated] = useState<string | null>(null);
  return (
    <>
      {can('token.create') ? (
        <Form
          label="Create an API token"
          submit="Create token"
          run={() => api<{ token: string }>('POST', `/api/v1/organisations/${org}/tokens`, { name, role, ...(project ? { projectId: Number(project) } : {}) })}
          onDone={(r) => {
            setCreated((r as { token: string }).token);
            setName('');
            setRefresh((n) => n + 1);
          }}
        >
          <Field label="Token name" value={name} onInput={setName} required />
          <Select
            label="Role"
            value={role}
            onChange={setRole}
            options={[
              ['read', 'read: sees, changes nothing'],
              ['admin', 'admin: manages'],
              ['signer', 'signer: signs and sends (project tokens)'],
            ]}
          />
          <Field label="Project id (empty: the whole organisation)" value={project} onInput={setProject} />
        </Form>
      ) : null}
      <Check label="Show revoked" checked={showRevoked} onChange={setShowRevoked} />
      <PagedList<Token>
        caption="API tokens"
        path={`/api/v1/organisations/${org}/tokens`}
        query={{ showRevoked }}
        itemsKey="tokens"
        rowKey={(t) => t.id}
        refresh={refresh}
        empty="No tokens."
        columns={[
          { label: 'Id', render: (t) => t.id },
          { label: 'Name', render: (t) => t.name },
          { label: 'Role', render: (t) => t.role },
          { label: 'Scope', render: (t) => (t.projectId ? `project ${t.projectId}` : 'organisation') },
          { label: 'Created', render: (t) => when(t.createdAt) },
          { label: 'Revoked', render: (t) => when(t.revokedAt) },
          {
            label: 'Actions',
            render: (t) =>
              can('token.revoke') && !t.revokedAt ? (
                <Action
                  label="Revoke"
                  kind="danger"
                  confirm={`Revoke token ${t.name}? Its console sessions end too.`}
                  run={() => api('DELETE', `/api/v1/organisations/${org}/tokens/${t.id}`)}
                  onDone={() => setRefresh((n) => n + 1)}
                />
              ) : null,
          },
        ]}
      />
      {created ? <ShownOnce title="The new API token" secret={created} onClose={() => setCreated(null)} /> : null}
    </>
  );
}
