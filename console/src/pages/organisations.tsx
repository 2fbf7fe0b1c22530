import { useState } from 'preact/hooks';
import { api } from '../api.js';
import type { PageProps } from '../main.js';
import { go } from '../place.js';
import { Action, Check, Field, Form, PagedList, when } from '../ui.js';
import type { OrganisationOut as Organisation } from '../types.js';

function Rename({ org, onDone }: { org: Organisation; onDone: () => void }) {
  const [name, setName] = useState(org.name);
  return (
    <Form label={`Rename organisation ${org.id}`} submit="Rename" run={() => api('PUT', `/api/v1/organisations/${org.id}`, { name })} onDone={onDone}>
      <Field label={`New name of ${org.id}`} value={name} onInput={setName} required />
    </Form>
  );
}

export function OrganisationsPage({ can }: PageProps) {
  const [showDeleted, setShowDeleted] = useState(false);
  const [name, setName] = useState('');
  const [find, setFind] = useState('');
  const [found, setFound] = useState('');
  const [refresh, setRefresh] = useState(0);
  const [renaming, setRenaming] = useState<number | null>(null);
  const changed = () => {
    setRenaming(null);
    setRefresh((r) => r + 1);
  };
  return (
    <>
      {can('organisation.create') ? (
        <Form
          label="Create an organisation"
          submit="Create organisation"
          run={() => api('POST', '/api/v1/organisations', { name })}
          onDone={() => {
            setName('');
            changed();
          }}
        >
          <Field label="Name" value={name} onInput={setName} required />
        </Form>
      ) : null}
      <Form
        label="Find organisations"
        submit="Find"
        run={() => {
          setFound(find.trim());
          return Promise.resolve();
        }}
      >
        <Field label="Name contains" value={find} onInput={setFind} />
      </Form>
      <Check label="Show deleted" checked={showDeleted} onChange={setShowDeleted} />
      <PagedList<Organisation>
        caption="Organisations"
        path="/api/v1/organisations"
        query={{ showDeleted, name: found }}
        itemsKey="organisations"
        rowKey={(o) => o.id}
        refresh={refresh}
        empty="No organisations yet."
        columns={[
          { label: 'Id', render: (o) => o.id },
          {
            label: 'Name',
            render: (o) => (
              <a href={`#/projects?organisation=${o.id}`} onClick={() => go({ page: 'projects', organisation: o.id })}>
                {o.name}
              </a>
            ),
          },
          { label: 'Created', render: (o) => when(o.createdAt) },
          { label: 'Deleted', render: (o) => when(o.deletedAt) },
          {
            label: 'Actions',
            render: (o) => (
              <>
                {can('organisation.rename') && !o.deletedAt ? (
                  renaming === o.id ? (
                    <Rename org={o} onDone={changed} />
                  ) : (
                    <button type="button" onClick={() => setRenaming(o.id)}>
                      Rename
                    </button>
                  )
                ) : null}
                {can('organisation.delete') && !o.deletedAt ? (
                  <Action
                    label="Delete"
                    kind="danger"
                    confirm={`Delete organisation ${o.name}?`}
                    run={() => api('DELETE', `/api/v1/organisations/${o.id}`)}
                    onDone={changed}
                  />
                ) : null}
                {can('organisation.undelete') && o.deletedAt ? (
                  <Action label="Undelete" run={() => api('POST', `/api/v1/organisations/${o.id}/undelete`)} onDone={changed} />
                ) : null}
              </>
            ),
          },
        ]}
      />
    </>
  );
}
