import { api } from './api.js';
import type { Principal } from './api.js';
import { go, type Place } from './place.js';
import { ErrorBox, useLoad } from './ui.js';

interface Named {
  id: number;
  name: string;
}

/** How many organisations and projects the pickers offer; the Organisations and Projects pages page through all of them. */
const PICK = 100;

/** The organisation and project a page acts in: pickers for the operator and organisation tokens, fixed for a project token. */
export function ContextBar({ place, principal, needs }: { place: Place; principal: Principal; needs: 'none' | 'organisation' | 'project' }) {
  const orgs = useLoad(
    () =>
      principal.scope === 'operator'
        ? api<{ organisations: Named[] }>('GET', `/api/v1/organisations?limit=${PICK}`).then((b) => b.organisations)
        : Promise.resolve<Named[]>([]),
    [principal.scope],
  );
  const projects = useLoad(
    () =>
      place.organisation !== undefined && principal.scope !== 'project'
        ? api<{ projects: Named[] }>('GET', `/api/v1/organisations/${place.organisation}/projects?limit=${PICK}`).then((b) => b.projects)
        : Promise.resolve<Named[]>([]),
    [place.organisation, principal.scope],
  );
  if (needs === 'none') return null;
  return (
    <div class="context" role="group" aria-label="Context">
      {principal.scope === 'operator' ? (
        <label class="field">
          <span>Organisation</span>
          <select
            value={place.organisation ?? ''}
            onChange={(e) => {
              const v = e.currentTarget.value;
              go({ page: place.page, ...(v ? { organisation: Number(v) } : {}) });
            }}
          >
            <option value="">Choose…</option>
            {orgs.status === 'ok' ? orgs.data.map((o) => <option key={o.id} value={o.id}>{`${o.name} (${o.id})`}</option>) : null}
          </select>
        </label>
      ) : (
        <p>Organisation {principal.organisationId}</p>
      )}
      {needs === 'project' ? (
        principal.scope === 'project' ? (
          <p>Project {principal.projectId}</p>
        ) : (
          <label class="field">
            <span>Project</span>
            <select
              value={place.project ?? ''}
              onChange={(e) => {
                const v = e.currentTarget.value;
                go({
                  page: place.page,
                  ...(place.organisation !== undefined ? { organisation: place.organisation } : {}),
                  ...(v ? { project: Number(v) } : {}),
                });
              }}
            >
              <option value="">Choose…</option>
              {projects.status === 'ok' ? projects.data.map((p) => <option key={p.id} value={p.id}>{`${p.name} (${p.id})`}</option>) : null}
            </select>
          </label>
        )
      ) : null}
      {orgs.status === 'error' ? <ErrorBox error={orgs.error} /> : null}
      {projects.status === 'error' ? <ErrorBox error={projects.error} /> : null}
    </div>
  );
}
