import { useState } from 'preact/hooks';
import type { PageProps } from '../main.js';
import { Field, Form, PagedList, when } from '../ui.js';
import { MembershipList } from './memberships.js';
import type { WalletOut as Wallet } from '../types.js';

const ADDRESS = /^0x[0-9a-fA-F]{40}$/;

export function WalletsPage({ place, can }: PageProps) {
  const project = place.project as number;
  const [text, setText] = useState('');
  const [search, setSearch] = useState<{ email?: string; address?: string }>({});
  const [chosen, setChosen] = useState<Wallet | null>(null);
  return (
    <>
      <Form
        label="Find a wallet"
        submit="Find"
        run={() => {
          const t = text.trim();
          setSearch(t === '' ? {} : ADDRESS.test(t) ? { address: t } : { email: t });
          setChosen(null);
          return Promise.resolve();
        }}
      >
        <Field label="E-mail or address" value={text} onInput={setText} placeholder="ada@example.com or 0x…" />
      </Form>
      <PagedList<Wallet>
        caption="Wallets"
        path={`/api/v1/project/${project}/wallets`}
        query={search}
        itemsKey="wallets"
        rowKey={(w) => w.walletId}
        empty="No wallet matches."
        columns={[
          { label: 'Id', render: (w) => w.walletId },
          { label: 'E-mail', render: (w) => w.emailAddress },
          { label: 'Address', render: (w) => <code>{w.walletAddress}</code> },
          { label: 'Created', render: (w) => when(w.createdAt) },
          {
            label: 'Memberships',
            render: (w) => (
              <button type="button" onClick={() => setChosen(w)}>
                Show memberships
              </button>
            ),
          },
        ]}
      />
      {chosen ? (
        <section aria-label="The wallet's memberships">
          <h2>Memberships of {chosen.emailAddress}</h2>
          <MembershipList project={project} filter={{ walletAddress: chosen.walletAddress, includeRevoked: true, includeExpired: true }} can={can} />
        </section>
      ) : null}
    </>
  );
}
