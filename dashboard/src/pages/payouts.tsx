import { useState } from 'preact/hooks';
import { api, query } from '../api';
import { ProjectFrame } from '../project-frame';
import type { Balances, Page, Payout, Project } from '../types';
import { Empty, ErrorMessage, Field, Loading, Pager, SelectField, StatusBadge, TableWrap, Time, useAction, useLoad, usePager } from '../ui';

const COINS = ['BTC', 'LTC', 'ETH', 'USDT', 'USDC', 'TRX', 'POL', 'BNB'];
const PAYOUT_STATUSES = ['AwaitingVerification', 'Pending', 'Completed', 'Rejected', 'Cancelled'];

function BalanceTable({ balances }: { balances: Balances | undefined }) {
  if (!balances) return <Loading what="balances" />;
  if (balances.balances.length === 0) return <Empty>No {balances.environment} balance yet: paid invoices credit it.</Empty>;
  return (
    <TableWrap label="Balances">
      <thead>
        <tr>
          <th scope="col">Currency</th>
          <th scope="col">Network</th>
          <th scope="col">Available</th>
          <th scope="col">Pending</th>
          <th scope="col">Total</th>
        </tr>
      </thead>
      <tbody>
        {balances.balances.map((b) => (
          <tr key={`${b.currency}-${b.network}`} data-testid={`balance-${b.currency}-${b.network}`}>
            <th scope="row">{b.currency}</th>
            <td>{b.network}</td>
            <td>{b.available}</td>
            <td>{b.pending}</td>
            <td>{b.total}</td>
          </tr>
        ))}
      </tbody>
    </TableWrap>
  );
}

/** The emailed code for a payout awaiting verification. */
function VerifyForm({ project, payout, onVerified }: { project: Project; payout: Payout; onVerified: () => void }) {
  const [code, setCode] = useState('');
  const action = useAction(async () => {
    await api.post<Payout>('/api/payout/verify', { projectId: project.id, payoutId: payout.id, code: code.trim() });
    onVerified();
  });
  return (
    <form
      class="inline-form"
      onSubmit={(e) => {
        e.preventDefault();
        void action.run();
      }}
    >
      <Field
        label={`Verification code for ${payout.amount} ${payout.currency}`}
        inputMode="numeric"
        autoComplete="one-time-code"
        pattern="[0-9]{6}"
        maxLength={6}
        required
        value={code}
        onValue={setCode}
        hint="The 6-digit code we emailed you; valid 15 minutes, 5 attempts."
      />
      <button type="submit" class="primary" disabled={action.busy}>
        Verify payout
      </button>
      <ErrorMessage error={action.error} />
    </form>
  );
}

/** The coin a payout is most likely of: the first with an available balance (else BTC). */
function defaultCoin(balances: Balances | undefined): string {
  return balances?.balances.find((b) => b.available > 0)?.currency ?? 'BTC';
}

/**
 * The networks offered for `currency`: those its balances are on (a payout debits its (currency,
 * network) balance, docs/accounting.md). "" sends none: the currency's default network, chosen by
 * the service, which also refuses a network that does not carry the coin.
 */
function networkOptions(balances: Balances | undefined, currency: string): [string, string][] {
  const networks = (balances?.balances ?? []).filter((b) => b.currency === currency).map((b) => b.network);
  return [['', 'Default network'], ...networks.map((n): [string, string] => [n, n])];
}

function RequestPayout({ project, balances, onRequested }: { project: Project; balances: Balances | undefined; onRequested: (p: Payout) => void }) {
  // Follows the balances until the merchant picks a coin: a reload must not reset it to BTC.
  const [picked, setPicked] = useState<string | null>(null);
  const currency = picked ?? defaultCoin(balances);
  const setCurrency = setPicked;
  const [network, setNetwork] = useState('');
  const [amount, setAmount] = useState('');
  const [address, setAddress] = useState('');
  const [note, setNote] = useState('');
  const action = useAction(async () => {
    // The amount as typed, a decimal string the API takes exactly: no binary float in between.
    const body: Record<string, unknown> = { projectId: project.id, currency, amount: amount.trim(), address: address.trim() };
    if (network) body.network = network;
    if (note.trim()) body.note = note.trim();
    const payout = await api.post<Payout>('/api/payout/request', body);
    setAmount('');
    setAddress('');
    setNote('');
    onRequested(payout);
  });
  return (
    <form
      onSubmit={(e) => {
        e.preventDefault();
        void action.run();
      }}
    >
      <div class="grid">
        <SelectField
          label="Currency"
          value={currency}
          onValue={(c) => {
            setCurrency(c);
            setNetwork('');
          }}
          options={COINS.map((c): [string, string] => [c, c])}
        />
        <SelectField label="Network" value={network} onValue={setNetwork} options={networkOptions(balances, currency)} />
        <Field label="Amount" inputMode="decimal" required value={amount} onValue={setAmount} hint="At most 8 decimal places (6 for USDT, USDC and TRX)." />
        <Field
          label="Destination address"
          required
          autoComplete="off"
          spellcheck={false}
          value={address}
          onValue={setAddress}
          hint={project.environment === 'sandbox' ? 'A testnet address on that network (tb1…, tltc1…, Sepolia, Shasta).' : 'A mainnet address on that network (an EVM address on EVM networks, a Tron address on tron).'}
        />
        <Field label="Note" maxLength={500} value={note} onValue={setNote} hint="Optional, up to 500 characters." />
      </div>
      <ErrorMessage error={action.error} />
      <button type="submit" class="primary" disabled={action.busy}>
        Request payout
      </button>
    </form>
  );
}

function CancelButton({ project, payout, onCancelled }: { project: Project; payout: Payout; onCancelled: () => void }) {
  const action = useAction(async () => {
    await api.post<Payout>(`/api/payout/${payout.id}/cancel`, { projectId: project.id });
    onCancelled();
  });
  return (
    <>
      <button type="button" class="danger" disabled={action.busy} onClick={() => void action.run()} aria-label={`Cancel payout of ${payout.amount} ${payout.currency}`}>
        Cancel
      </button>
      <ErrorMessage error={action.error} />
    </>
  );
}

function Payouts({ project }: { project: Project }) {
  const balances = useLoad(() => api.get<Balances>(`/api/payout/balance${query({ projectId: project.id })}`), [project.id]);
  const [status, setStatus] = useState('');
  const pager = usePager();
  const history = useLoad(
    () => api.get<Page<Payout>>(`/api/payout/history${query({ projectId: project.id, status, limit: 20, cursor: pager.cursor })}`),
    [project.id, status, pager.cursor],
  );
  const [verifying, setVerifying] = useState<Payout | null>(null);
  const [message, setMessage] = useState('');
  const refresh = () => {
    balances.reload();
    history.reload();
  };
  return (
    <>
      <section aria-labelledby="balances">
        <h2 id="balances">Balances</h2>
        {balances.error ? <ErrorMessage error={balances.error} /> : <BalanceTable balances={balances.data} />}
      </section>
      <section aria-labelledby="request-payout">
        <h2 id="request-payout">Request a payout</h2>
        <RequestPayout
          project={project}
          balances={balances.data}
          onRequested={(p) => {
            setVerifying(p);
            setMessage(`Payout of ${p.amount} ${p.currency} requested: enter the code we emailed you.`);
            refresh();
          }}
        />
        <p role="status" aria-live="polite" data-testid="payout-message">
          {message}
        </p>
        {verifying && (
          <VerifyForm
            key={verifying.id}
            project={project}
            payout={verifying}
            onVerified={() => {
              setMessage(`Payout of ${verifying.amount} ${verifying.currency} verified.`);
              setVerifying(null);
              refresh();
            }}
          />
        )}
      </section>
      <section aria-labelledby="payout-history">
        <h2 id="payout-history">History</h2>
        <div class="filters">
          <SelectField
            label="Payout status"
            value={status}
            onValue={(v) => {
              pager.reset();
              setStatus(v);
            }}
            options={[['', 'All statuses'], ...PAYOUT_STATUSES.map((s): [string, string] => [s, s])]}
          />
        </div>
        {history.error ? (
          <ErrorMessage error={history.error} />
        ) : !history.data ? (
          <Loading what="payouts" />
        ) : history.data.items.length === 0 ? (
          <Empty>No payouts{status ? ' with this status' : ' yet'}.</Empty>
        ) : (
          <>
            <TableWrap label="Payout history">
              <thead>
                <tr>
                  <th scope="col">Requested</th>
                  <th scope="col">Amount</th>
                  <th scope="col">Network</th>
                  <th scope="col">Address</th>
                  <th scope="col">Status</th>
                  <th scope="col">Details</th>
                  <th scope="col">Actions</th>
                </tr>
              </thead>
              <tbody>
                {history.data.items.map((p) => (
                  <tr key={p.id} data-testid="payout-row" data-payout-id={p.id}>
                    <td>
                      <Time iso={p.createdAt} />
                    </td>
                    <td>
                      {p.amount} {p.currency}
                    </td>
                    <td>{p.network}</td>
                    <td>
                      <code class="wrap">{p.address}</code>
                    </td>
                    <td>
                      <StatusBadge status={p.status} />
                      {p.processing && <div class="muted">Being sent</div>}
                    </td>
                    <td class="wrap">
                      {p.transactionHash && (
                        <>
                          tx <code>{p.transactionHash}</code>
                        </>
                      )}
                      {p.adminNote && <>Operator: {p.adminNote}</>}
                      {p.note && <span class="muted"> {p.note}</span>}
                    </td>
                    <td class="row-actions">
                      {p.status === 'AwaitingVerification' && (
                        <button type="button" onClick={() => setVerifying(p)} aria-label={`Enter the code for payout of ${p.amount} ${p.currency}`}>
                          Enter code
                        </button>
                      )}
                      {(p.status === 'AwaitingVerification' || (p.status === 'Pending' && !p.processing)) && (
                        <CancelButton
                          project={project}
                          payout={p}
                          onCancelled={() => {
                            if (verifying?.id === p.id) setVerifying(null);
                            setMessage(`Payout of ${p.amount} ${p.currency} cancelled.`);
                            refresh();
                          }}
                        />
                      )}
                    </td>
                  </tr>
                ))}
              </tbody>
            </TableWrap>
            <Pager pager={pager} nextCursor={history.data.nextCursor} label="Payout" />
          </>
        )}
      </section>
    </>
  );
}

export function PayoutsPage({ params }: { params: { id: string } }) {
  return (
    <ProjectFrame projectId={params.id} section="Payouts">
      {(project) => <Payouts project={project} />}
    </ProjectFrame>
  );
}
