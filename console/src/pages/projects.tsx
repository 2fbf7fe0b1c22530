import { useState } from 'preact/hooks';
import { api } from '../api.js';
import type { PageProps } from '../main.js';
import { go } from '../place.js';
import { Action, Check, ErrorBox, Field, Form, Loading, PagedList, ShownOnce, useLoad, when } from '../ui.js';
import type { IssuerCheckOut as IssuerCheck, ProjectOut as Project } from '../types.js';

function ProjectForm(props: {
  label: string;
  submit: string;
  initial?: Project;
  run: (body: Record<string, unknown>) => Promise<unknown>;
  onDone: (r: unknown) => void;
}) {
  const [name, setName] = useState(props.initial?.name ?? '');
  const [issuer, setIssuer] = useState(props.initial?.issuer ?? '');
  const [hook, setHook] = useState(props.initial?.walletWebhookUrl ?? '');
  const [verified, setVerified] = useState(props.initial?.requireVerifiedEmail ?? true);
  const body = () => ({
    name,
    issuer,
    requireVerifiedEmail: verified,
    ...(hook ? { walletWebhookUrl: hook } : props.initial ? { walletWebhookUrl: null } : {}),
  });
  return (
    <Form label={props.label} submit={props.submit} run={() => props.run(body())} onDone={props.onDone}>
      <Field label="Project name" value={name} onInput={setName} required />
      <Field label="Issuer (OIDC)" value={issuer} onInput={setIssuer} placeholder="https://login.example.com" required />
      <Field label="Wallet webhook URL (optional)" value={hook} onInput={setHook} />
      <Check label="Require a verified e-mail" checked={verified} onChange={setVerified} />
    </Form>
  );
}

function IssuerCheckForm({ project }: { project: number }) {
  const [jwt, setJwt] = useState('');
  const [result, setResult] = useState<IssuerCheck | null>(null);
  return (
    <section aria-label="Issuer check">
      <h3>Issuer check</h3>
      <Form
        label="Check the issuer with a JWT"
        submit="Check"
        run={() => api<IssuerCheck>('POST', `/api/v1/project/${project}/issuer/check`, { token: jwt.trim() })}
        onDone={(r) => setResult(r as IssuerCheck)}
      >
        <Field label="A user's JWT (pasted)" value={jwt} onInput={setJwt} area rows={3} required />
      </Form>
      {result ? (
        <table>
          <caption>{result.ok ? 'Every check passed' : 'A check failed'}</caption>
          <thead>
            <tr>
              <th scope="col">Check</th>
              <th scope="col">Outcome</th>
              <th scope="col">Detail</th>
            </tr>
          </thead>
          <tbody>
            {result.checks.map((c) => (
              <tr key={c.name}>
                <td>{c.name}</td>
                <td class={`outcome ${c.outcome}`}>{c.outcome}</td>
                <td>{c.detail ?? ''}</td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : null}
    </section>
  );
}

/** One project: edit, rotate its key and wallet webhook secret, check its issuer. */
function ProjectDetail({ id, can, onChanged }: { id: number; can: (a: string) => boolean; onChanged: () => void }) {
  const project = useLoad(() => api<Project>('GET', `/api/v1/project/${id}`), [id]);
  const [secret, setSecret] = useState<{ title: string; value: string; note?: string } | null>(null);
  if (project.status === 'loading') return <Loading what="the project" />;
  if (project.status === 'error') return <ErrorBox error={project.error} />;
  const p = project.data;
  return (
    <section class="detail" aria-label={`Project ${p.name}`}>
      <h2>
        {p.name} <small>({p.environment})</small>
      </h2>
      {can('project.change') ? (
        <ProjectForm
          label="Edit the project"
          submit="Save project"
          initial={p}
          run={(body) => api('PUT', `/api/v1/project/${id}`, body)}
          onDone={() => {
            project.reload();
            onChanged();
          }}
        />
      ) : (
        <dl>
          <dt>Issuer</dt>
          <dd>{p.issuer}</dd>
          <dt>Wallet webhook</dt>
          <dd>{p.walletWebhookUrl ?? '—'}</dd>
        </dl>
      )}
      <div class="buttons">
        {can('project.rotateKey') ? (
          <Action
            label="Rotate the project key"
            confirm="Rotate the project key? The old key keeps working for a day."
            run={() => api<{ projectKey: string }>('POST', `/api/v1/project/${id}/keys`, {})}
            onDone={(r) =>
              setSecret({ title: 'The new project key', value: (r as { projectKey: string }).projectKey, note: 'The previous key works for one more day.' })
            }
          />
        ) : null}
        {can('project.rotateWalletWebhookSecret') ? (
          <Action
            label="Rotate the wallet webhook secret"
            confirm="Rotate the wallet webhook secret?"
            run={() => api<{ walletWebhookSecret: string }>('POST', `/api/v1/project/${id}/walletWebhook/secret`)}
            onDone={(r) =>
              setSecret({
                title: 'The new wallet webhook secret',
                value: (r as { walletWebhookSecret: string }).walletWebhookSecret,
                note: 'The previous secret also signs deliveries for 24 hours.',
              })
            }
          />
        ) : null}
      </div>
      {can('project.checkIssuer') ? <IssuerCheckForm project={id} /> : null}
      {secret ? <ShownOnce title={secret.title} secret={secret.value} {...(secret.note ? { note: secret.note } : {})} onClose={() => setSecret(null)} /> : null}
    </section>
  );
}

export function ProjectsPage({ place, can, principal }: PageProps) {
  const [refresh, setRefresh] = useState(0);
  const [showDeleted, setShowDeleted] = useState(false);
  const [created, setCreated] = useState<string | null>(null);
  const org = place.organisation;
  if (principal.scope === 'project' && principal.projectId !== undefined)
    return <ProjectDetail id={principal.projectId} can={can} onChanged={() => undefined} />;
  return (
    <>
      {can('project.create') ? (
        <details>
          <summary>Create a project</summary>
          <ProjectForm
            label="Create a project"
            submit="Create project"
            run={(body) => api<{ projectKey: string }>('POST', `/api/v1/organisations/${org}/projects`, body)}
            onDone={(r) => {
              setCreated((r as { projectKey: string }).projectKey);
              setRefresh((n) => n + 1);
            }}
          />
        </details>
      ) : null}
      <Check label="Show deleted" checked={showDeleted} onChange={setShowDeleted} />
      <PagedList<Project>
        caption="Projects"
        path={`/api/v1/organisations/${org}/projects`}
        query={{ showDeleted }}
        itemsKey="projects"
        rowKey={(p) => p.id}
        refresh={refresh}
        empty="No projects in this organisation."
        columns={[
          { label: 'Id', render: (p) => p.id },
          {
            label: 'Name',
            render: (p) => (
              <a
                href={`#/projects?organisation=${org}&project=${p.id}`}
                onClick={() => org !== undefined && go({ page: 'projects', organisation: org, project: p.id })}
              >
                {p.name}
              </a>
            ),
          },
          { label: 'Environment', render: (p) => p.environment },
          { label: 'Issuer', render: (p) => p.issuer },
          { label: 'Created', render: (p) => when(p.createdAt) },
          {
            label: 'Actions',
            render: (p) =>
              can('project.delete') && !p.deletedAt ? (
                <Action
                  label="Delete"
                  kind="danger"
                  confirm={`Delete project ${p.name}?`}
                  run={() => api('DELETE', `/api/v1/project/${p.id}`)}
                  onDone={() => setRefresh((n) => n + 1)}
                />
              ) : null,
          },
        ]}
      />
      {place.project !== undefined ? <ProjectDetail id={place.project} can={can} onChanged={() => setRefresh((n) => n + 1)} /> : null}
      {created ? <ShownOnce title="The new project's key" secret={created} onClose={() => setCreated(null)} /> : null}
    </>
  );
}
