import { useEffect, useState } from 'preact/hooks';
import { api, query } from '../api';
import { ProjectFrame } from '../project-frame';
import type { DeliveryLog, Project, WebhookAttempt, WebhookDelivery } from '../types';
import { Empty, ErrorMessage, Loading, Pager, SelectField, StatusBadge, TableWrap, Time, useAction, useLoad, usePager } from '../ui';

function Attempts({ projectId, deliveryId }: { projectId: string; deliveryId: string }) {
  const detail = useLoad(
    () => api.get<WebhookDelivery & { attempts: WebhookAttempt[] }>(`/api/merchant/projects/${projectId}/webhook-deliveries/${deliveryId}`),
    [projectId, deliveryId],
  );
  if (detail.error) return <ErrorMessage error={detail.error} />;
  if (!detail.data) return <Loading what="the attempts" />;
  if (detail.data.attempts.length === 0) return <Empty>Not attempted yet.</Empty>;
  return (
    <ol class="attempts" data-testid="attempts">
      {detail.data.attempts.map((a) => (
        <li key={a.attemptNumber}>
          <h4>
            Attempt {a.attemptNumber} · <Time iso={a.attemptedAt} /> · {a.durationMs} ms ·{' '}
            {a.responseStatus !== null ? `HTTP ${a.responseStatus}` : 'no response'}
          </h4>
          {a.error && <p class="error-text">{a.error}</p>}
          {a.detailsRemovedAt ? (
            <p class="muted" data-testid="details-removed">
              Request and response removed <Time iso={a.detailsRemovedAt} /> (kept for a limited time); this summary stays.
            </p>
          ) : (
            <>
              <details>
                <summary>Request sent</summary>
                <pre>{Object.entries(a.requestHeaders).map(([k, v]) => `${k}: ${v}\n`)}</pre>
                <pre>{a.requestBody}</pre>
              </details>
              <details>
                <summary>Response received</summary>
                <pre>{a.responseBodyExcerpt || '(empty body)'}</pre>
              </details>
            </>
          )}
        </li>
      ))}
    </ol>
  );
}

/** Deliveries as a table (the Webhooks page, an invoice's detail), a row each. */
export function DeliveryTable({ label, projectId, deliveries, onChanged }: { label: string; projectId: string; deliveries: WebhookDelivery[]; onChanged: () => void }) {
  return (
    <TableWrap label={label}>
      <thead>
        <tr>
          <th scope="col">Event</th>
          <th scope="col">Status</th>
          <th scope="col">Attempts</th>
          <th scope="col">Last response</th>
          <th scope="col">Created</th>
          <th scope="col">Actions</th>
        </tr>
      </thead>
      <tbody>
        {deliveries.map((d) => (
          <DeliveryRow key={d.id} projectId={projectId} delivery={d} onChanged={onChanged} />
        ))}
      </tbody>
    </TableWrap>
  );
}

/** One delivery in a table: open it to see each attempt, or send it again. */
function DeliveryRow({ projectId, delivery, onChanged }: { projectId: string; delivery: WebhookDelivery; onChanged: () => void }) {
  const [open, setOpen] = useState(false);
  const redeliver = useAction(async () => {
    await api.post(`/api/merchant/projects/${projectId}/webhook-deliveries/${delivery.id}/redeliver`);
    onChanged();
  });
  return (
    <>
      <tr data-testid="delivery-row">
        <td>
          <code>{delivery.eventType}</code>
          {delivery.redeliveryOf && <span class="muted"> (redelivery)</span>}
          {delivery.deliveredBy && <span class="muted" data-testid="delivered-by"> (delivered by a redelivery)</span>}
        </td>
        <td>
          <StatusBadge status={delivery.status} />
          {delivery.status === 'pending' && delivery.attemptCount > 0 && delivery.nextAttemptAt && (
            <span class="muted" data-testid="next-attempt">
              {' '}
              next attempt <Time iso={delivery.nextAttemptAt} />
            </span>
          )}
        </td>
        <td>{delivery.attemptCount}</td>
        <td>{delivery.lastResponseStatus ?? <span class="muted">{delivery.attemptCount > 0 ? 'no response' : '—'}</span>}</td>
        <td>
          <Time iso={delivery.createdAt} />
        </td>
        <td class="row-actions">
          <button type="button" aria-expanded={open} onClick={() => setOpen(!open)} aria-label={`${open ? 'Hide' : 'Show'} attempts of ${delivery.eventType} delivery`}>
            {open ? 'Hide attempts' : 'Attempts'}
          </button>
          <button type="button" disabled={redeliver.busy} onClick={() => void redeliver.run()} aria-label={`Redeliver ${delivery.eventType} delivery`}>
            Redeliver
          </button>
        </td>
      </tr>
      {(open || redeliver.error) && (
        <tr class="detail-row">
          <td colSpan={6}>
            <ErrorMessage error={redeliver.error} />
            {open && <Attempts projectId={projectId} deliveryId={delivery.id} />}
          </td>
        </tr>
      )}
    </>
  );
}

function Log({ project }: { project: Project }) {
  const [status, setStatus] = useState('');
  const pager = usePager();
  const [tick, setTick] = useState(0);
  const log = useLoad(
    () => api.get<DeliveryLog>(`/api/merchant/projects/${project.id}/webhook-deliveries${query({ status, limit: 20, cursor: pager.cursor })}`),
    [project.id, status, pager.cursor, tick],
  );
  // A pending delivery is about to be attempted: the log follows it until it settles.
  const pending = log.data?.items.some((d) => d.status === 'pending') ?? false;
  useEffect(() => {
    if (!pending) return;
    const timer = setTimeout(() => setTick((t) => t + 1), 2000);
    return () => clearTimeout(timer);
  }, [pending, log.data]);
  const [sent, setSent] = useState(false);
  const test = useAction(async () => {
    setSent(false);
    await api.post(`/api/merchant/projects/${project.id}/webhook-test`);
    setSent(true);
    pager.reset();
    log.reload();
  });
  const endpoint = log.data?.endpoint;
  return (
    <>
      <section aria-labelledby="endpoint">
        <h2 id="endpoint">Endpoint</h2>
        {endpoint ? (
          <dl class="fields" data-testid="endpoint-health">
            <div>
              <dt>URL</dt>
              <dd class="wrap">{endpoint.url ?? 'none: set a webhook URL in the project settings'}</dd>
            </div>
            <div>
              <dt>Last success</dt>
              <dd>{endpoint.lastSuccessAt ? <Time iso={endpoint.lastSuccessAt} /> : 'never'}</dd>
            </div>
            <div>
              <dt>Consecutive failures</dt>
              <dd data-testid="consecutive-failures">{endpoint.consecutiveFailures}</dd>
            </div>
          </dl>
        ) : (
          !log.error && <Loading what="the endpoint's health" />
        )}
        <button type="button" disabled={test.busy || !project.webhookUrl} onClick={() => void test.run()}>
          Send a test event
        </button>
        <span role="status" aria-live="polite" class="muted">
          {sent ? ' Test event queued: it appears in the log below.' : ''}
        </span>
        <ErrorMessage error={test.error} />
      </section>
      <section aria-labelledby="delivery-log">
        <h2 id="delivery-log">Delivery log</h2>
        {log.data && (
          <p class="muted" data-testid="log-retention">
            Each attempt's request and response are kept for {log.data.logRetentionDays} days; after that only its time, status code and
            duration stay.
          </p>
        )}
        <div class="filters">
          <SelectField
            label="Delivery status"
            value={status}
            onValue={(v) => {
              pager.reset();
              setStatus(v);
            }}
            options={[
              ['', 'All'],
              ['pending', 'Pending'],
              ['succeeded', 'Succeeded'],
              ['failed', 'Failed'],
            ]}
          />
          <button type="button" onClick={log.reload}>
            Refresh
          </button>
        </div>
        {log.error ? (
          <ErrorMessage error={log.error} />
        ) : !log.data ? (
          <Loading what="deliveries" />
        ) : log.data.items.length === 0 ? (
          <Empty>No webhook deliveries{status ? ' with this status' : ' yet'}.</Empty>
        ) : (
          <>
            <DeliveryTable label="Webhook deliveries" projectId={project.id} deliveries={log.data.items} onChanged={log.reload} />
            <Pager pager={pager} nextCursor={log.data.nextCursor} label="Delivery" />
          </>
        )}
      </section>
    </>
  );
}

export function WebhooksPage({ params }: { params: { id: string } }) {
  return (
    <ProjectFrame projectId={params.id} section="Webhooks">
      {(project) => <Log project={project} />}
    </ProjectFrame>
  );
}
