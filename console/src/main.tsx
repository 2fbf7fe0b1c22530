import { render, type JSX } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import './app.css';
import { currentSession, signIn, signOut, useSession, type Principal, type Session } from './api.js';
import { ErrorBox, Field, Form, Loading } from './ui.js';
import { ContextBar } from './context-bar.js';
import { type Place, placeOf, hrefOf } from './place.js';
import { OrganisationsPage } from './pages/organisations.js';
import { ProjectsPage } from './pages/projects.js';
import { TokensPage } from './pages/tokens.js';
import { WebhooksPage } from './pages/webhooks.js';
import { WalletsPage } from './pages/wallets.js';
import { MembershipsPage } from './pages/memberships.js';
import { AuditPage } from './pages/audit.js';
import { PolicyPage } from './pages/policy.js';
import { TransactionsPage } from './pages/transactions.js';

export interface PageProps {
  principal: Principal;
  place: Place;
  can: (action: string) => boolean;
}

/** The pages, in the order of the navigation: each shown when the token may take its `read` action; `needs` says which context it acts in. */
const PAGES: Array<{ id: string; title: string; read: string; needs: 'none' | 'organisation' | 'project'; view: (p: PageProps) => JSX.Element }> = [
  { id: 'organisations', title: 'Organisations', read: 'organisation.list', needs: 'none', view: OrganisationsPage },
  { id: 'projects', title: 'Projects', read: 'project.read', needs: 'organisation', view: ProjectsPage },
  { id: 'tokens', title: 'API tokens', read: 'token.list', needs: 'organisation', view: TokensPage },
  { id: 'webhooks', title: 'Webhooks', read: 'webhook.read', needs: 'project', view: WebhooksPage },
  { id: 'wallets', title: 'Wallets', read: 'wallet.read', needs: 'project', view: WalletsPage },
  { id: 'memberships', title: 'Memberships', read: 'membership.read', needs: 'project', view: MembershipsPage },
  { id: 'audit', title: 'Audit log', read: 'audit.read', needs: 'organisation', view: AuditPage },
  { id: 'policy', title: 'Signing policy', read: 'policy.read', needs: 'project', view: PolicyPage },
  { id: 'transactions', title: 'Transactions', read: 'transaction.read', needs: 'project', view: TransactionsPage },
];

function SignIn() {
  const [token, setToken] = useState('');
  return (
    <main class="signin">
      <h1>Custody console</h1>
      <p>Sign in with an API token. The token is exchanged for a session and is not kept by the browser; the console can do what the token can.</p>
      <Form label="Sign in" submit="Sign in" run={() => signIn(token.trim())} onDone={() => location.reload()}>
        <Field label="API token" type="password" value={token} onInput={setToken} required autoComplete="off" />
      </Form>
    </main>
  );
}

function App() {
  const [session, setSession] = useState<Session | null | undefined>(undefined);
  const [error, setError] = useState<unknown>(null);
  const [hash, setHash] = useState(location.hash);
  useEffect(() => {
    const onHash = () => setHash(location.hash);
    window.addEventListener('hashchange', onHash);
    currentSession().then(setSession, setError);
    return () => window.removeEventListener('hashchange', onHash);
  }, []);
  useSession(session ?? null, () => setSession(null));

  if (error)
    return (
      <main>
        <h1>Custody console</h1>
        <ErrorBox error={error} />
      </main>
    );
  if (session === undefined)
    return (
      <main>
        <Loading what="the session" />
      </main>
    );
  // Signed in, the page loads again: the token typed is gone with the sign-in page, and the console starts from its session.
  if (session === null) return <SignIn />;

  const principal = session.principal;
  const can = (action: string) => principal.may.includes(action);
  const pages = PAGES.filter((p) => can(p.read));
  const place = placeOf(hash, principal, pages[0]?.id ?? 'organisations');
  const page = pages.find((p) => p.id === place.page) ?? pages[0] ?? PAGES[0]!;
  const missing = page.needs === 'project' ? place.project === undefined : page.needs === 'organisation' ? place.organisation === undefined : false;
  const who = principal.scope === 'operator' ? 'operator' : `${principal.scope} token ${principal.tokenId} (${principal.role})`;
  return (
    <div class="shell">
      <header>
        <p class="brand">Custody console</p>
        <p class="who">
          Signed in as <strong>{who}</strong>
        </p>
        <button
          type="button"
          onClick={() => {
            void signOut().finally(() => setSession(null));
          }}
        >
          Sign out
        </button>
      </header>
      <nav aria-label="Pages">
        <ul>
          {pages.map((p) => (
            <li key={p.id}>
              <a href={hrefOf({ ...place, page: p.id })} aria-current={p.id === page.id ? 'page' : undefined}>
                {p.title}
              </a>
            </li>
          ))}
        </ul>
      </nav>
      <main>
        <h1>{page.title}</h1>
        <ContextBar place={place} principal={principal} needs={page.needs} />
        {missing ? (
          <p class="empty">Choose {page.needs === 'project' ? 'a project' : 'an organisation'} above.</p>
        ) : (
          <page.view key={page.id} principal={principal} place={place} can={can} />
        )}
      </main>
    </div>
  );
}

const root = document.getElementById('app');
if (root) render(<App />, root);
