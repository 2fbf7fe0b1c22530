import type { ComponentChildren, TargetedEvent } from 'preact';
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { api, ApiError, withQuery } from './api.js';

export type Load<T> = { status: 'loading' } | { status: 'error'; error: unknown } | { status: 'ok'; data: T };

/** Runs `load` when `deps` change; `reload` runs it again. A late answer of an earlier run is dropped. */
export function useLoad<T>(load: () => Promise<T>, deps: unknown[]): Load<T> & { reload: () => void } {
  const [state, setState] = useState<Load<T>>({ status: 'loading' });
  const [tick, setTick] = useState(0);
  useEffect(() => {
    let live = true;
    setState({ status: 'loading' });
    load().then(
      (data) => live && setState({ status: 'ok', data }),
      (error: unknown) => live && setState({ status: 'error', error }),
    );
    return () => {
      live = false;
    };
  }, [...deps, tick]);
  const reload = useCallback(() => setTick((t) => t + 1), []);
  return { ...state, reload };
}

export function Loading({ what }: { what?: string }) {
  return (
    <p class="loading" role="status">
      Loading{what ? ` ${what}` : ''}…
    </p>
  );
}

/** A problem answer as the service gave it: its title, detail and each field's message. */
export function ErrorBox({ error }: { error: unknown }) {
  if (!(error instanceof ApiError))
    return (
      <p class="error" role="alert">
        {String(error)}
      </p>
    );
  const p = error.problem;
  return (
    <div class="error" role="alert">
      <strong>
        {p.status ? `${p.status} ` : ''}
        {p.title}
      </strong>
      {p.detail ? <span>: {p.detail}</span> : null}
      {p.errors && p.errors.length > 0 ? (
        <ul>
          {p.errors.map((e, i) => (
            <li key={i}>
              {e.path ? <code>{e.path}</code> : null} {e.message}
            </li>
          ))}
        </ul>
      ) : null}
    </div>
  );
}

export function Empty({ children }: { children: ComponentChildren }) {
  return <p class="empty">{children}</p>;
}

export interface Column<T> {
  label: string;
  render: (row: T) => ComponentChildren;
}

interface Page<T> {
  items: T[];
  nextCursor: string | null;
}

/**
 * A list paged with the service's cursors: one page is loaded at a time (never the whole list),
 * with previous and next; loading, empty and error states are shown.
 */
export function PagedList<T>(props: {
  caption: string;
  path: string;
  query?: Record<string, string | number | boolean | undefined | null>;
  itemsKey: string;
  columns: Column<T>[];
  rowKey: (row: T) => string | number;
  empty: string;
  /** Change it to load the first page again (after a write). */
  refresh?: number;
  limit?: number;
}) {
  const [cursors, setCursors] = useState<Array<string | null>>([null]);
  const queryKey = JSON.stringify(props.query ?? {});
  useEffect(() => setCursors([null]), [props.path, queryKey, props.refresh]);
  const cursor = cursors[cursors.length - 1] ?? null;
  const page = useLoad<Page<T>>(async () => {
    const body = await api<Record<string, unknown>>('GET', withQuery(props.path, { ...props.query, limit: props.limit ?? 25, cursor }));
    return { items: (body[props.itemsKey] as T[] | undefined) ?? [], nextCursor: (body['nextCursor'] as string | null | undefined) ?? null };
  }, [props.path, queryKey, cursor, props.refresh]);
  return (
    <section class="list" aria-label={props.caption}>
      {page.status === 'loading' ? <Loading what={props.caption.toLowerCase()} /> : null}
      {page.status === 'error' ? <ErrorBox error={page.error} /> : null}
      {page.status === 'ok' && page.data.items.length === 0 ? <Empty>{props.empty}</Empty> : null}
      {page.status === 'ok' && page.data.items.length > 0 ? (
        <table>
          <caption>{props.caption}</caption>
          <thead>
            <tr>
              {props.columns.map((c) => (
                <th scope="col" key={c.label}>
                  {c.label}
                </th>
              ))}
            </tr>
          </thead>
          <tbody>
            {page.data.items.map((row) => (
              <tr key={props.rowKey(row)}>
                {props.columns.map((c) => (
                  <td key={c.label}>{c.render(row)}</td>
                ))}
              </tr>
            ))}
          </tbody>
        </table>
      ) : null}
      <div class="pager">
        <button type="button" disabled={cursors.length <= 1} onClick={() => setCursors((c) => c.slice(0, -1))}>
          Previous page
        </button>
        <span>Page {cursors.length}</span>
        <button
          type="button"
          disabled={page.status !== 'ok' || page.data.nextCursor === null}
          onClick={() => page.status === 'ok' && page.data.nextCursor !== null && setCursors((c) => [...c, page.data.nextCursor])}
        >
          Next page
        </button>
      </div>
    </section>
  );
}

/** An async action's run: busy while it runs, then `onDone` with its result, or its error kept to show. */
function useRun(run: () => Promise<unknown>, onDone?: (result: unknown) => void) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const start = async () => {
    setBusy(true);
    setError(null);
    try {
      // Not `onDone?.(await run())`: an optional call skips its arguments when there is no onDone.
      const result = await run();
      onDone?.(result);
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return { busy, error, start };
}

/** A button running an async action: busy while it runs, its error shown beside it. */
export function Action(props: {
  label: string;
  run: () => Promise<unknown>;
  confirm?: string;
  kind?: 'danger' | 'primary';
  onDone?: (result: unknown) => void;
}) {
  const { busy, error, start } = useRun(props.run, props.onDone);
  const click = () => {
    if (props.confirm && !window.confirm(props.confirm)) return;
    void start();
  };
  return (
    <span class="action">
      <button type="button" class={props.kind ?? ''} disabled={busy} onClick={click}>
        {busy ? `${props.label}…` : props.label}
      </button>
      {error ? <ErrorBox error={error} /> : null}
    </span>
  );
}

/** A form whose submit runs an async action; its problem answer is shown under it. */
export function Form(props: { label: string; submit: string; run: () => Promise<unknown>; onDone?: (result: unknown) => void; children: ComponentChildren }) {
  const { busy, error, start } = useRun(props.run, props.onDone);
  const onSubmit = (e: TargetedEvent<HTMLFormElement>) => {
    e.preventDefault();
    void start();
  };
  return (
    <form class="form" aria-label={props.label} onSubmit={onSubmit}>
      {props.children}
      <button type="submit" class="primary" disabled={busy}>
        {busy ? `${props.submit}…` : props.submit}
      </button>
      {error ? <ErrorBox error={error} /> : null}
    </form>
  );
}

let fieldIds = 0;
/** A labelled input; `area` for JSON and long text. */
export function Field(props: {
  label: string;
  value: string;
  onInput: (v: string) => void;
  type?: 'text' | 'password' | 'date' | 'datetime-local';
  area?: boolean;
  rows?: number;
  placeholder?: string;
  required?: boolean;
  autoComplete?: string;
}) {
  const id = useRef(`f${++fieldIds}`).current;
  const onInput = (e: TargetedEvent<HTMLInputElement | HTMLTextAreaElement>) => props.onInput(e.currentTarget.value);
  return (
    <label class="field" for={id}>
      <span>{props.label}</span>
      {props.area ? (
        <textarea
          id={id}
          value={props.value}
          rows={props.rows ?? 8}
          onInput={onInput}
          placeholder={props.placeholder}
          required={props.required}
          spellcheck={false}
        />
      ) : (
        <input
          id={id}
          // Preact's types tie each input type to its own attributes (tsc refuses the union); these four take the same ones.
          // eslint-disable-next-line @typescript-eslint/no-unnecessary-type-assertion
          type={(props.type ?? 'text') as 'text'}
          value={props.value}
          onInput={onInput}
          placeholder={props.placeholder}
          required={props.required}
          autoComplete={props.autoComplete ?? 'off'}
        />
      )}
    </label>
  );
}

export function Check(props: { label: string; checked: boolean; onChange: (v: boolean) => void }) {
  return (
    <label class="check">
      <input type="checkbox" checked={props.checked} onChange={(e) => props.onChange(e.currentTarget.checked)} /> {props.label}
    </label>
  );
}

export function Select(props: { label: string; value: string; options: Array<[string, string]>; onChange: (v: string) => void }) {
  const id = useRef(`s${++fieldIds}`).current;
  return (
    <label class="field" for={id}>
      <span>{props.label}</span>
      <select id={id} value={props.value} onChange={(e) => props.onChange(e.currentTarget.value)}>
        {props.options.map(([v, l]) => (
          <option key={v} value={v}>
            {l}
          </option>
        ))}
      </select>
    </label>
  );
}

/** A secret the service shows once (a token, a project key, a webhook secret): shown here, never kept by the console. */
export function ShownOnce(props: { title: string; secret: string; note?: string; onClose: () => void }) {
  const [copied, setCopied] = useState(false);
  const closeRef = useRef<HTMLButtonElement>(null);
  useEffect(() => closeRef.current?.focus(), []);
  return (
    <div class="overlay">
      <div class="dialog" role="dialog" aria-modal="true" aria-labelledby="shown-once-title">
        <h2 id="shown-once-title">{props.title}</h2>
        <p>This is shown once: store it now. The service keeps only its hash and cannot show it again.</p>
        {props.note ? <p>{props.note}</p> : null}
        <output class="secret" aria-label="The secret">
          {props.secret}
        </output>
        <div class="buttons">
          <button
            type="button"
            onClick={() => {
              void navigator.clipboard?.writeText(props.secret).then(() => setCopied(true));
            }}
          >
            {copied ? 'Copied' : 'Copy'}
          </button>
          <button type="button" class="primary" ref={closeRef} onClick={props.onClose}>
            I have stored it
          </button>
        </div>
      </div>
    </div>
  );
}

export const when = (iso: string | null | undefined): string => (iso ? new Date(iso).toISOString().replace('T', ' ').slice(0, 19) : '—');

export function Json({ value }: { value: unknown }) {
  // Focusable: a long document scrolls inside it, and a keyboard must reach it.
  return (
    <pre class="json" tabIndex={0}>
      {JSON.stringify(value, null, 2)}
    </pre>
  );
}
