import { useState } from 'preact/hooks';
import { Link, useLocation } from 'wouter-preact';
import { api, query } from '../api';
import { formatFiat } from '../money';
import { ProjectFrame } from '../project-frame';
import type { Invoice, Page, PayCurrency, Project } from '../types';
import { Empty, ErrorMessage, Field, Loading, Pager, SelectField, StatusBadge, TableWrap, Time, useAction, useLoad, usePager } from '../ui';

const FIAT = ['USD', 'EUR', 'GBP', 'JPY', 'CHF', 'CAD', 'AUD'];

/** What this deployment takes, (asset, network) by (asset, network): GET /api/currencies (docs/networks.md). */
export function usePayCurrencies() {
  return useLoad(() => api.get<{ currencies: PayCurrency[] }>('/api/currencies').then((r) => r.currencies), []);
}

/** A network as customers know it ("BNB Smart Chain"), from the list; the id where the list has none. */
export function networkLabelOf(currencies: readonly PayCurrency[] | undefined, network: string): string {
  return currencies?.find((c) => c.network === network)?.networkLabel ?? network;
}

/**
 * An invoice made by hand (a payment link to send a customer): the public API's POST /api/invoice
 * with this session and the project's id, the same rules as a shop's backend. Opens it when made.
 */
function CreateInvoice({ project }: { project: Project }) {
  const [, navigate] = useLocation();
  const [priceAmount, setPriceAmount] = useState('');
  const [priceCurrency, setPriceCurrency] = useState('EUR');
  const [payCurrency, setPayCurrency] = useState('BTC');
  const currencies = usePayCurrencies();
  const coins = [...new Set((currencies.data ?? []).map((c) => c.currency))];
  // The asset's networks in registry order; the first is its own (default) network.
  const networks = (currencies.data ?? []).filter((c) => c.currency === payCurrency);
  const [chosenNetwork, setPayNetwork] = useState('');
  const payNetwork = networks.some((c) => c.network === chosenNetwork) ? chosenNetwork : (networks[0]?.network ?? '');
  const [orderId, setOrderId] = useState('');
  const [successUrl, setSuccessUrl] = useState('');
  const [cancelUrl, setCancelUrl] = useState('');
  const create = useAction(async () => {
    const body: Record<string, unknown> = {
      projectId: project.id,
      // As typed: a decimal string the API takes exactly.
      priceAmount: priceAmount.trim(),
      priceCurrency,
      payCurrency,
      ...(payNetwork ? { payNetwork } : {}),
      successUrl: successUrl.trim(),
      cancelUrl: cancelUrl.trim(),
    };
    if (orderId.trim()) body.orderId = orderId.trim();
    const invoice = await api.post<Invoice>('/api/invoice', body);
    navigate(`/projects/${project.id}/invoices/${invoice.id}`);
  });
  return (
    <section aria-labelledby="create-invoice">
      <h2 id="create-invoice">Create an invoice</h2>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          void create.run();
        }}
      >
        <div class="grid">
          <Field label="Price" inputMode="decimal" required placeholder="19.90" value={priceAmount} onValue={setPriceAmount} />
          <SelectField label="Price currency" value={priceCurrency} onValue={setPriceCurrency} options={FIAT.map((c): [string, string] => [c, c])} />
          <SelectField label="Paid in" value={payCurrency} onValue={setPayCurrency} options={(coins.length > 0 ? coins : [payCurrency]).map((c): [string, string] => [c, c])} />
          <SelectField
            label="Network"
            value={payNetwork}
            onValue={setPayNetwork}
            options={networks.map((c): [string, string] => [c.network, `${c.networkLabel}${c.contract ? ` (${c.contract.slice(0, 6)}…${c.contract.slice(-4)})` : ''}`])}
          />
          <Field label="Order reference" value={orderId} onValue={setOrderId} hint="Optional: your order id, echoed as orderId." />
          <Field label="Success URL" type="url" required placeholder="https://shop.example/thanks" value={successUrl} onValue={setSuccessUrl} hint="Where the customer goes after paying." />
          <Field label="Cancel URL" type="url" required placeholder="https://shop.example/cart" value={cancelUrl} onValue={setCancelUrl} hint="Where the customer goes on giving up." />
        </div>
        <ErrorMessage error={currencies.error} />
        <ErrorMessage error={create.error} />
        <button type="submit" class="primary" disabled={create.busy}>
          Create invoice
        </button>
      </form>
    </section>
  );
}

export const INVOICE_STATUSES = ['Waiting', 'Confirming', 'PartiallyPaid', 'Paid', 'Expired'];

function InvoiceList({ project }: { project: Project }) {
  const [status, setStatus] = useState('');
  const [orderId, setOrderId] = useState('');
  const [search, setSearch] = useState('');
  const pager = usePager();
  const currencies = usePayCurrencies();
  const invoices = useLoad(
    () => api.get<Page<Invoice>>(`/api/merchant/projects/${project.id}/invoices${query({ status, orderId: search, limit: 20, cursor: pager.cursor })}`),
    [project.id, status, search, pager.cursor],
  );
  return (
    <section aria-labelledby="invoice-list">
      <h2 id="invoice-list">Invoices</h2>
      <form
        class="filters"
        role="search"
        onSubmit={(e) => {
          e.preventDefault();
          pager.reset();
          setSearch(orderId.trim());
        }}
      >
        <SelectField
          label="Status"
          value={status}
          onValue={(v) => {
            pager.reset();
            setStatus(v);
          }}
          options={[['', 'All statuses'], ...INVOICE_STATUSES.map((s): [string, string] => [s, s])]}
        />
        <Field label="Order id" type="search" value={orderId} onValue={setOrderId} />
        <button type="submit">Search</button>
      </form>
      {invoices.error ? (
        <ErrorMessage error={invoices.error} />
      ) : !invoices.data ? (
        <Loading what="invoices" />
      ) : invoices.data.items.length === 0 ? (
        <Empty>
          {status || search
            ? 'No invoice matches these filters.'
            : 'No invoices yet. Create one with the form above, or with an API key of this project (POST /api/invoice).'}
        </Empty>
      ) : (
        <>
          <TableWrap label="Invoices">
            <thead>
              <tr>
                <th scope="col">Created</th>
                <th scope="col">Order</th>
                <th scope="col">Price</th>
                <th scope="col">Pay</th>
                <th scope="col">Status</th>
              </tr>
            </thead>
            <tbody>
              {invoices.data.items.map((i) => (
                <tr key={i.id} data-testid="invoice-row">
                  <td>
                    <Link href={`/projects/${project.id}/invoices/${i.id}`} aria-label={`Invoice ${i.orderId || i.id}`}>
                      <Time iso={i.createdAt} />
                    </Link>
                  </td>
                  <td>{i.orderId || <span class="muted">—</span>}</td>
                  <td>{formatFiat(i.priceAmount, i.priceCurrency)}</td>
                  <td>
                    {i.amountExpected} {i.payCurrency}{' '}
                    <span class="muted" data-testid="invoice-network">
                      on {networkLabelOf(currencies.data, i.payNetwork)}
                    </span>
                  </td>
                  <td>
                    <StatusBadge status={i.status} />
                  </td>
                </tr>
              ))}
            </tbody>
          </TableWrap>
          <Pager pager={pager} nextCursor={invoices.data.nextCursor} label="Invoice" />
        </>
      )}
    </section>
  );
}

export function InvoicesPage({ params }: { params: { id: string } }) {
  return (
    <ProjectFrame projectId={params.id} section="Invoices">
      {(project) => (
        <>
          <CreateInvoice project={project} />
          <InvoiceList project={project} />
        </>
      )}
    </ProjectFrame>
  );
}
