import { useState } from 'preact/hooks';
import { api, withQuery } from '../api.js';
import type { PageProps } from '../main.js';
import { Action, Check, ErrorBox, Field, Form, Json, PagedList, ShownOnce, useLoad, when } from '../ui.js';
import type { FailedDeliveryList, SubscriptionOut as Subscription } from '../types.js';
type Delivery = FailedDeliveryList['failedDeliveries'][number];

function CreateSubscription({ project, onDone }: { project: number; onDone: (secret: string) => void }) {
  const catalogue = useLoad(() => api<{ events: Array<{ name: string; description: string }> }>('GET', '/api/v1/webhooks/events'), []);
  const [url, setUrl] = useState('');
  const [events, setEvents] = useState<string[]>([]);
  return (
    <Form
      label="Subscribe a webhook"
      submit="Create subscription"
      run={() => api<{ secret?: string }>('POST', `/api/v1/project/${project}/webhooks`, { url, events })}
      onDone={(r) => {
        setUrl('');
        setEvents([]);
        onDone((r as { secret?: string }).secret ?? '');
      }}
    >
      <Field label="Endpoint URL" value={url} onInput={setUrl} placeholder="https://api.example.com/hooks" required />
      <fieldset>
        <legend>Events</legend>
        {catalogue.status === 'error' ? <ErrorBox error={catalogue.error} /> : null}
        {catalogue.status === 'ok'
          ? catalogue.data.events.map((e) => (
              <Check
                key={e.name}
                label={e.name}
                checked={events.includes(e.name)}
                onChange={(on) => setEvents((l) => (on ? [...l, e.name] : l.filter((x) => x !== e.name)))}
              />
            ))
          : null}
      </fieldset>
    </Form>
  );
}

/** Retries every failed delivery, a page at a time, saying how far it got. */
function RetryAll({ project, onDone }: { project: number; onDone: () => void }) {
  const [progress, setProgress] = useState<{ done: number; failed: number; running: boolean } | null>(null);
  const run = async () => {
    let done = 0;
    let failed = 0;
    setProgress({ done, failed, running: true });
    let cursor: string | null = null;
    do {
      const page: { failedDeliveries: Delivery[]; nextCursor: string | null } = await api(
        'GET',
        withQuery(`/api/v1/project/${project}/webhooks/failedDeliveries`, { limit: 100, cursor }),
      );
      for (const d of page.failedDeliveries) {
        try {
          await api('POST', `/api/v1/project/${project}/webhooks/failedDeliveries/${d.id}/retry`);
          done++;
        } catch {
          failed++;
        }
        setProgress({ done, failed, running: true });
      }
      cursor = page.nextCursor;
    } while (cursor !== null);
    setProgress({ done, failed, running: false });
    onDone();
  };
  return (
    <span class="action">
      <Action label="Retry all" confirm="Retry every failed delivery of this project?" run={run} />
      {progress ? (
        <span role="status" class="progress">
          {progress.running ? 'Retrying: ' : 'Retried: '}
          {progress.done} queued{progress.failed ? `, ${progress.failed} refused` : ''}
        </span>
      ) : null}
    </span>
  );
}

export function WebhooksPage({ place, can }: PageProps) {
  const project = place.project as number;
  const [refresh, setRefresh] = useState(0);
  const [showDeleted, setShowDeleted] = useState(false);
  const [secret, setSecret] = useState<string | null>(null);
  const [note, setNote] = useState<string | null>(null);
  const [open, setOpen] = useState<number | null>(null);
  const again = () => setRefresh((n) => n + 1);
  return (
    <>
      <h2>Subscriptions</h2>
      {can('webhook.write') ? (
        <details>
          <summary>Subscribe a webhook</summary>
          <CreateSubscription
            project={project}
            onDone={(s) => {
              if (s) setSecret(s);
              again();
            }}
          />
        </details>
      ) : null}
      <Check label="Show deleted" checked={showDeleted} onChange={setShowDeleted} />
      {note ? (
        <p role="status" class="note">
          {note}
        </p>
      ) : null}
      <PagedList<Subscription>
        caption="Webhook subscriptions"
        path={`/api/v1/project/${project}/webhooks`}
        query={{ showDeleted }}
        itemsKey="webhooks"
        rowKey={(w) => w.id}
        refresh={refresh}
        empty="No webhook subscriptions."
        columns={[
          { label: 'Id', render: (w) => w.id },
          { label: 'URL', render: (w) => <code>{w.url}</code> },
          { label: 'Events', render: (w) => w.events.join(', ') },
          { label: 'State', render: (w) => (w.deletedAt ? 'deleted' : w.disabledAt ? `disabled: ${w.disabledReason ?? ''}` : 'active') },
          {
            label: 'Actions',
            render: (w) =>
              can('webhook.write') && !w.deletedAt ? (
                <>
                  <Action
                    label="Test ping"
                    run={() => api<{ deliveryId: number }>('POST', `/api/v1/project/${project}/webhooks/${w.id}/test`)}
                    onDone={(r) => setNote(`Test ping queued as delivery ${(r as { deliveryId: number }).deliveryId}.`)}
                  />
                  <Action
                    label="Rotate secret"
                    confirm="Rotate this subscription's signing secret?"
                    run={() => api<{ secret: string }>('POST', `/api/v1/project/${project}/webhooks/${w.id}/secret`, {})}
                    onDone={(r) => setSecret((r as { secret: string }).secret)}
                  />
                  <Action
                    label="Delete"
                    kind="danger"
                    confirm="Delete this subscription?"
                    run={() => api('DELETE', `/api/v1/project/${project}/webhooks/${w.id}`)}
                    onDone={again}
                  />
                </>
              ) : null,
          },
        ]}
      />
      <h2>Failed deliveries</h2>
      {can('delivery.retry') ? <RetryAll project={project} onDone={again} /> : null}
      <PagedList<Delivery>
        caption="Failed deliveries"
        path={`/api/v1/project/${project}/webhooks/failedDeliveries`}
        itemsKey="failedDeliveries"
        rowKey={(d) => d.id}
        refresh={refresh}
        empty="No failed deliveries."
        columns={[
          { label: 'Id', render: (d) => d.id },
          { label: 'Event', render: (d) => d.event },
          { label: 'URL', render: (d) => <code>{d.url}</code> },
          { label: 'Attempts', render: (d) => d.attempts },
          { label: 'Last error', render: (d) => `${d.lastStatus ?? ''} ${d.lastError ?? ''}`.trim() || '—' },
          { label: 'Last attempt', render: (d) => when(d.lastAttemptAt) },
          {
            label: 'Details',
            render: (d) =>
              open === d.id ? (
                <div class="delivery">
                  <button type="button" onClick={() => setOpen(null)}>
                    Hide
                  </button>
                  <h3>Payload</h3>
                  <Json value={d.payload} />
                  <h3>Last response</h3>
                  <pre class="json" tabIndex={0}>
                    {d.lastResponseBody ?? '(none)'}
                  </pre>
                </div>
              ) : (
                <button type="button" onClick={() => setOpen(d.id)}>
                  Show payload
                </button>
              ),
          },
          {
            label: 'Actions',
            render: (d) =>
              can('delivery.retry') ? (
                <Action label="Retry" run={() => api('POST', `/api/v1/project/${project}/webhooks/failedDeliveries/${d.id}/retry`)} onDone={again} />
              ) : null,
          },
        ]}
      />
      {secret ? <ShownOnce title="The subscription's signing secret" secret={secret} onClose={() => setSecret(null)} /> : null}
    </>
  );
}
