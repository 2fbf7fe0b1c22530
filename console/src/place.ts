import type { Principal } from './api.js';

/** Where the console is: the page, and the organisation and project it acts in (kept in the URL's hash, so a reload stays there). */
export interface Place {
  page: string;
  organisation?: number;
  project?: number;
}

const id = (s: string | null): number | undefined => (s && /^[1-9][0-9]{0,14}$/.test(s) ? Number(s) : undefined);

/** Reads `#/<page>?organisation=1&project=2`; a token of one organisation or project is always there. */
export function placeOf(hash: string, p: Principal, first: string): Place {
  const [path = '', query = ''] = hash.replace(/^#\/?/, '').split('?');
  const q = new URLSearchParams(query);
  const organisation = p.scope === 'operator' ? id(q.get('organisation')) : p.organisationId;
  const project = p.scope === 'project' ? p.projectId : id(q.get('project'));
  return {
    page: path || first,
    ...(organisation !== undefined ? { organisation } : {}),
    ...(project !== undefined && organisation !== undefined ? { project } : {}),
  };
}

export function hrefOf(place: Place): string {
  const q = new URLSearchParams();
  if (place.organisation !== undefined) q.set('organisation', String(place.organisation));
  if (place.project !== undefined) q.set('project', String(place.project));
  const s = q.toString();
  return `#/${place.page}${s ? `?${s}` : ''}`;
}

export function go(place: Place): void {
  location.hash = hrefOf(place);
}
