import type { ComponentChildren } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { Link } from 'wouter-preact';
import { api, query } from '../api';
import { formatFiat, formatRate } from '../money';
import { ProjectFrame } from '../project-frame';
import type { DeliveryLog, Invoice, PayCurrency, Project } from '../types';
import { networkLabelOf, usePayCurrencies } from './invoices';
import { Empty, ErrorMessage, Loading, StatusBadge, TableWrap, Time, useAction, useLoad } from '../ui';
import { DeliveryTable } from './webhooks';

/** Statuses that can still change: the page follows them live. */
const OPEN = new Set(['Waiting', 'Confirming', 'PartiallyPaid']);
const POLL_MS = 3000;

/** "static" is the rate table; providers' names mean the median of their fresh quotes. */
function rateSource(sources: string[]): string {
  const providers = sources.filter((s) => s !== 'static');
  const parts = [...(providers.length > 0 ? [`${providers.length > 1 ? 'median of ' : ''}${providers.join(', ')}`] : []), ...(sources.includes('static') ? ['the static rate table'] : [])];
  return parts.join(' and ');
}

function Fields({ invoice, currencies }: { invoice: Invoice; currencies: readonly PayCurrency[] | undefined }) {
  const rows: Array<[string, ComponentChildren]> = [
    ['Status', <StatusBadge status={invoice.status} />],
    ['Invoice id', <code>{invoice.id}</code>],
    ['Order id', invoice.orderId || '—'],
    ['Order description', invoice.orderDescription || '—'],
    ['Price', formatFiat(invoice.priceAmount, invoice.priceCurrency)],
    ['Price in USD', formatFiat(invoice.priceAmountInUsd, 'USD')],
    ['Amount expected', `${invoice.amountExpected} ${invoice.payCurrency}`],
    ['Amount received', `${invoice.amountReceived} ${invoice.payCurrency}`],
    ['Pay currency', invoice.payCurrency],
    ['Network', <span data-testid="invoice-network">{networkLabelOf(currencies, invoice.payNetwork)} <code>{invoice.payNetwork}</code></span>],
    ['Exchange rate', `1 ${invoice.payCurrency} = ${formatRate(invoice.pricing.rate, invoice.priceCurrency)}`],
    ['Rate source', rateSource(invoice.pricing.rateSources)],
    ['Rate quoted', invoice.pricing.rateQuotedAt ? <Time iso={invoice.pricing.rateQuotedAt} /> : '—'],
    ['Address', <code class="wrap">{invoice.address}</code>],
    ['Created', <Time iso={invoice.createdAt} />],
    ['Expires', <Time iso={invoice.expiredAt} />],
    ['Success URL', <span class="wrap">{invoice.successUrl}</span>],
    ['Cancel URL', <span class="wrap">{invoice.cancelUrl}</span>],
    ['Project', invoice.projectName],
    ['Donation', invoice.isDonation ? 'yes' : 'no'],
  ];
  if (invoice.confirmationsRequired !== undefined) rows.push(['Confirmations required', String(invoice.confirmationsRequired)]);
  return (
    <dl class="fields" data-testid="invoice-fields">
      {rows.map(([k, v]) => (
        <div key={k}>
          <dt>{k}</dt>
          <dd>{v}</dd>
        </div>
      ))}
    </dl>
  );
}

function Payments({ invoice, currencies }: { invoice: Invoice; currencies: readonly PayCurrency[] | undefined }) {
  if (invoice.payments === undefined) return null;
  return (
    <section aria-labelledby="payments">
      <h2 id="payments">Payments</h2>
      {invoice.payments.length === 0 ? (
        <Empty>No payment seen on chain yet.</Empty>
      ) : (
        <TableWrap label="Payments">
          <thead>
            <tr>
              <th scope="col">Transaction</th>
              <th scope="col">Amount</th>
              <th scope="col">Network</th>
              <th scope="col">Confirmations</th>
              <th scope="col">Status</th>
              <th scope="col">Detected</th>
            </tr>
          </thead>
          <tbody>
            {invoice.payments.map((p) => (
              <tr key={p.transactionHash}>
                <td>
                  <code class="wrap">{p.transactionHash}</code>
                </td>
                <td>
                  {p.amount} {invoice.payCurrency}
                </td>
                <td>
                  {networkLabelOf(currencies, p.network)}
                  {/* The same address exists on every EVM network: money sent on another one is recorded, never credited (docs/networks.md). */}
                  {p.network !== invoice.payNetwork ? <strong class="warning"> — wrong network, not credited</strong> : null}
                </td>
                <td>
                  {p.confirmations}
                  {invoice.confirmationsRequired !== undefined ? ` of ${invoice.confirmationsRequired}` : ''}
                </td>
                <td>{p.status}</td>
                <td>
                  <Time iso={p.detectedAt} />
                </td>
              </tr>
            ))}
          </tbody>
        </TableWrap>
      )}
    </section>
  );
}

function Deliveries({ project, invoice }: { project: Project; invoice: Invoice }) {
  const [tick, setTick] = useState(0);
  const log = useLoad(
    () => api.get<DeliveryLog>(`/api/merchant/projects/${project.id}/webhook-deliveries${query({ invoiceId: invoice.id, limit: 100 })}`),
    [project.id, invoice.id, invoice.status, tick],
  );
  // Webhooks follow a status change within moments: the list is followed live until they are settled.
  const items = log.data?.items;
  const unsettled =
    project.webhookUrl !== null && items !== undefined && ((items.length === 0 && invoice.status !== 'Waiting') || items.some((d) => d.status === 'pending'));
  useEffect(() => {
    if (!unsettled) return;
    const timer = setTimeout(() => setTick((t) => t + 1), POLL_MS);
    return () => clearTimeout(timer);
  }, [unsettled, items]);
  return (
    <section aria-labelledby="invoice-webhooks">
      <h2 id="invoice-webhooks">Webhooks for this invoice</h2>
      {log.error ? (
        <ErrorMessage error={log.error} />
      ) : !log.data ? (
        <Loading what="webhook deliveries" />
      ) : log.data.items.length === 0 ? (
        <Empty>{project.webhookUrl ? 'No webhook sent for this invoice yet.' : 'This project has no webhook URL: no webhooks are sent.'}</Empty>
      ) : (
        <DeliveryTable label="Webhook deliveries for this invoice" projectId={project.id} deliveries={log.data.items} onChanged={log.reload} />
      )}
    </section>
  );
}

function Detail({ project, invoiceId }: { project: Project; invoiceId: string }) {
  const [tick, setTick] = useState(0);
  const invoice = useLoad(() => api.get<Invoice>(`/api/merchant/invoices/${invoiceId}`), [invoiceId, tick]);
  const currencies = usePayCurrencies();
  const status = invoice.data?.status;
  useEffect(() => {
    if (!status || !OPEN.has(status)) return;
    const timer = setTimeout(() => setTick((t) => t + 1), POLL_MS);
    return () => clearTimeout(timer);
  }, [status, tick]);
  const simulate = useAction(async () => {
    await api.post<unknown>(`/api/merchant/invoices/${invoiceId}/simulate`);
    invoice.reload();
  });
  if (invoice.error && !invoice.data) return <ErrorMessage error={invoice.error} />;
  if (!invoice.data) return <Loading what="the invoice" />;
  const i = invoice.data;
  return (
    <>
      <p>
        <Link href={`/projects/${project.id}/invoices`}>← All invoices</Link>
      </p>
      <div class="actions">
        <a href={`/pay/${i.id}`} target="_blank" rel="noopener noreferrer">
          Open the checkout page
        </a>
        {project.environment === 'sandbox' && i.status === 'Waiting' && (
          <button type="button" class="primary" disabled={simulate.busy} onClick={() => void simulate.run()}>
            Simulate payment
          </button>
        )}
      </div>
      <ErrorMessage error={simulate.error} />
      <p class="muted" aria-live="polite">
        {OPEN.has(i.status) ? 'Following this invoice live.' : ''}
      </p>
      {project.environment === 'live' && i.pricing.rateSources.includes('static') && (
        <p class="warning" role="note" data-testid="static-rate-warning">
          <strong>Not a market price.</strong> This live invoice was priced from the static rate table
          {i.pricing.rateQuotedAt ? ` of ${i.pricing.rateQuotedAt.slice(0, 10)}` : ''} (the server runs with RATES_SOURCE=static), not
          from current Coinbase and Kraken quotes: the amount expected may be far from what the price is worth today.
        </p>
      )}
      <Fields invoice={i} currencies={currencies.data} />
      <Payments invoice={i} currencies={currencies.data} />
      <Deliveries project={project} invoice={i} />
    </>
  );
}

export function InvoiceDetailPage({ params }: { params: { id: string; invoiceId: string } }) {
  return (
    <ProjectFrame projectId={params.id} section="Invoice">
      {(project) => <Detail project={project} invoiceId={params.invoiceId} />}
    </ProjectFrame>
  );
}
