/** Small building blocks every page uses: titles, loading/empty/error states, labelled fields, times, secrets shown once. */
import type { ComponentChildren, JSX } from 'preact';
import { useCallback, useEffect, useId, useLayoutEffect, useRef, useState } from 'preact/hooks';
import { ApiError } from './api';

/**
 * The page title names the page (and the tab shows it). Set in the same task as the render that
 * shows the heading (a layout effect), so the two never disagree, not even for a frame.
 */
export function useTitle(title: string): void {
  useLayoutEffect(() => {
    document.title = `${title} · coinvoice dashboard`;
  }, [title]);
}

export function PageHeading({ title, children }: { title: string; children?: ComponentChildren }) {
  useTitle(title);
  const ref = useRef<HTMLHeadingElement>(null);
  // Moving focus to the new page's heading tells screen readers the page changed.
  useEffect(() => ref.current?.focus({ preventScroll: true }), [title]);
  return (
    <div class="page-heading">
      <h1 tabIndex={-1} ref={ref}>
        {title}
      </h1>
      {children}
    </div>
  );
}

export function errorOf(err: unknown): ApiError {
  if (err instanceof ApiError) return err;
  return new ApiError(0, 'client_error', err instanceof Error ? err.message : String(err));
}

/**
 * A problem+json error: its detail and, for bad input, each field's message, each said once. A
 * service's detail often spells the field messages out after a colon ("the request is invalid:
 * priceAmount must be …"): with the list below it, only its lead is shown.
 */
export function ErrorMessage({ error }: { error: unknown }) {
  if (!error) return null;
  const e = errorOf(error);
  const repeatsFields = e.errors.some((f) => e.detail.includes(f.message));
  const lead = repeatsFields && e.detail.includes(': ') ? e.detail.slice(0, e.detail.indexOf(': ')) : e.detail;
  return (
    <div class="error" role="alert">
      <p>{lead}</p>
      {e.errors.length > 0 && (
        <ul>
          {e.errors.map((f) => (
            <li key={f.field}>
              <strong>{f.field}</strong> {f.message}
            </li>
          ))}
        </ul>
      )}
    </div>
  );
}

export function Loading({ what }: { what: string }) {
  return (
    <p class="muted" role="status" aria-live="polite">
      Loading {what}…
    </p>
  );
}

export function Empty({ children }: { children: ComponentChildren }) {
  return <p class="empty">{children}</p>;
}

/** A time in the browser's time zone, the exact instant in the tooltip. */
export function Time({ iso }: { iso: string | null | undefined }) {
  if (!iso) return <span class="muted">—</span>;
  const d = new Date(iso);
  return (
    <time dateTime={iso} title={d.toISOString()}>
      {d.toLocaleString()}
    </time>
  );
}

type InputProps = Omit<JSX.InputHTMLAttributes<HTMLInputElement>, 'id' | 'onInput' | 'value'>;

/** A labelled input; `hint` is announced with it. */
export function Field({
  label,
  value,
  onValue,
  hint,
  ...rest
}: { label: string; value: string; onValue: (v: string) => void; hint?: string } & InputProps) {
  const id = useId();
  return (
    <div class="field">
      <label for={id}>{label}</label>
      <input
        id={id}
        value={value}
        onInput={(e) => onValue((e.currentTarget as HTMLInputElement).value)}
        aria-describedby={hint ? `${id}-hint` : undefined}
        {...rest}
      />
      {hint && (
        <small id={`${id}-hint`} class="muted">
          {hint}
        </small>
      )}
    </div>
  );
}

export function SelectField({
  label,
  value,
  onValue,
  options,
}: {
  label: string;
  value: string;
  onValue: (v: string) => void;
  options: Array<[value: string, label: string]>;
}) {
  const id = useId();
  return (
    <div class="field">
      <label for={id}>{label}</label>
      <select id={id} value={value} onChange={(e) => onValue((e.currentTarget as HTMLSelectElement).value)}>
        {options.map(([v, l]) => (
          <option key={v} value={v}>
            {l}
          </option>
        ))}
      </select>
    </div>
  );
}

/** A secret the server shows once: displayed with a copy button and a warning. */
export function SecretOnce({ label, secret, warning, testId }: { label: string; secret: string; warning: string; testId: string }) {
  const [copied, setCopied] = useState<'no' | 'yes' | 'failed'>('no');
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(secret);
      setCopied('yes');
    } catch {
      setCopied('failed');
    }
  };
  return (
    <section class="secret" aria-label={label}>
      <p class="warning">
        <strong>Shown only once.</strong> {warning}
      </p>
      <div class="secret-row">
        <code data-testid={testId}>{secret}</code>
        <button type="button" onClick={copy}>
          Copy {label.toLowerCase()}
        </button>
      </div>
      <p class="muted" role="status" aria-live="polite">
        {copied === 'yes' ? 'Copied to the clipboard.' : copied === 'failed' ? 'The browser refused the clipboard: select the text and copy it.' : ''}
      </p>
    </section>
  );
}

/** Loads data for a page and reloads it on demand; `error` is the problem to show. */
export function useLoad<T>(load: () => Promise<T>, deps: unknown[]): { data: T | undefined; error: unknown; loading: boolean; reload: () => void } {
  const [state, setState] = useState<{ data: T | undefined; error: unknown; loading: boolean }>({ data: undefined, error: undefined, loading: true });
  const [tick, setTick] = useState(0);
  useEffect(() => {
    let live = true;
    setState((s) => ({ ...s, loading: true }));
    load().then(
      (data) => live && setState({ data, error: undefined, loading: false }),
      (error: unknown) => live && setState({ data: undefined, error, loading: false }),
    );
    return () => {
      live = false;
    };
  }, [...deps, tick]);
  const reload = useCallback(() => setTick((t) => t + 1), []);
  return { ...state, reload };
}

/** Runs an action from a form or button: busy while it runs, its problem kept to show. */
export function useAction<A extends unknown[], R>(action: (...args: A) => Promise<R>) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(undefined);
  const run = async (...args: A): Promise<R | undefined> => {
    setBusy(true);
    setError(undefined);
    try {
      return await action(...args);
    } catch (err) {
      setError(err);
      return undefined;
    } finally {
      setBusy(false);
    }
  };
  return { run, busy, error, setError };
}

/** A wide table scrolls sideways on a phone instead of widening the page. */
export function TableWrap({ label, children }: { label: string; children: ComponentChildren }) {
  return (
    <div class="table-wrap" role="region" aria-label={label} tabIndex={0}>
      <table>{children}</table>
    </div>
  );
}

export function StatusBadge({ status }: { status: string }) {
  return <span class={`badge badge-${status.toLowerCase()}`}>{status}</span>;
}

/** Cursor paging: a stack of the cursors of earlier pages makes "Previous" possible. */
export function usePager() {
  const [stack, setStack] = useState<string[]>([]);
  const cursor = stack[stack.length - 1] ?? '';
  return {
    cursor,
    page: stack.length + 1,
    next: (c: string) => setStack((s) => [...s, c]),
    previous: () => setStack((s) => s.slice(0, -1)),
    reset: () => setStack([]),
  };
}

export function Pager({ pager, nextCursor, label }: { pager: ReturnType<typeof usePager>; nextCursor: string | null | undefined; label: string }) {
  if (pager.page === 1 && !nextCursor) return null;
  return (
    <nav class="pager" aria-label={`${label} pages`}>
      <button type="button" disabled={pager.page === 1} onClick={pager.previous}>
        Previous page
      </button>
      <span>Page {pager.page}</span>
      <button type="button" disabled={!nextCursor} onClick={() => nextCursor && pager.next(nextCursor)}>
        Next page
      </button>
    </nav>
  );
}
