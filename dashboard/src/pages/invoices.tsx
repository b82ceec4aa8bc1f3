import { useState } from 'preact/hooks';
import { Link } from 'wouter-preact';
import { api, query } from '../api';
import { ProjectFrame } from '../project-frame';
import type { Invoice, Page, Project } from '../types';
import { Empty, ErrorMessage, Field, Loading, Pager, SelectField, StatusBadge, TableWrap, Time, useLoad, usePager } from '../ui';

export const INVOICE_STATUSES = ['Waiting', 'Confirming', 'PartiallyPaid', 'Paid', 'Expired'];

function InvoiceList({ project }: { project: Project }) {
  const [status, setStatus] = useState('');
  const [orderId, setOrderId] = useState('');
  const [search, setSearch] = useState('');
  const pager = usePager();
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
            : 'No invoices yet. Create one with an API key of this project (POST /api/invoice).'}
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
                  <td>
                    {i.priceAmount} {i.priceCurrency}
                  </td>
                  <td>
                    {i.amountExpected} {i.payCurrency}
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
      {(project) => <InvoiceList project={project} />}
    </ProjectFrame>
  );
}
