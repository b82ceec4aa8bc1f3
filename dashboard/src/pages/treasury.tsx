/**
 * The operators' Treasury page (docs/treasury.md): per network the treasury address
 * and its balances read from the node, the pause switch, deposits awaiting sweep, payouts in
 * flight with their confirmations, the approval queue (payouts above the automatic maximum), and
 * the payouts the signer refused to sign (docs/treasury.md#signer-refusals).
 */
import type { ComponentChildren } from 'preact';
import { api } from '../api';
import { useAccount } from '../account';
import type { OperatorPayout, TreasuryNetwork } from '../types';
import { Empty, ErrorMessage, Loading, PageHeading, TableWrap, Time, useAction, useLoad } from '../ui';

function PauseSwitch({ network, onDone }: { network: TreasuryNetwork; onDone: () => void }) {
  const toggle = useAction(async () => {
    await api.post<TreasuryNetwork>(`/api/admin/treasury/${network.network}/${network.paused ? 'resume' : 'pause'}`);
    onDone();
  });
  return (
    <p>
      <span role="status" data-testid="treasury-state">
        {network.address === null
          ? 'Not running: no processor has recorded a treasury address for this network (is the treasury on? the signer and a processor for it must run).'
          : network.paused
            ? `Paused${network.pausedBy ? ` by ${network.pausedBy}` : ''}: no new transfer is started.`
            : 'Running.'}
      </span>{' '}
      {network.address !== null && (
        <button type="button" class={network.paused ? 'primary' : 'danger'} disabled={toggle.busy} onClick={() => void toggle.run()}>
          {network.paused ? `Resume ${network.network}` : `Pause ${network.network}`}
        </button>
      )}
      <ErrorMessage error={toggle.error} />
    </p>
  );
}

function ApproveButton({ payout, onDone }: { payout: OperatorPayout; onDone: () => void }) {
  const approve = useAction(async () => {
    await api.post(`/api/admin/payouts/${payout.id}/approve`);
    onDone();
  });
  return (
    <>
      <button type="button" class="primary" disabled={approve.busy} onClick={() => void approve.run()} aria-label={`Approve ${payout.amount} ${payout.currency}`}>
        Approve
      </button>
      <ErrorMessage error={approve.error} />
    </>
  );
}

function PayoutTable<P extends OperatorPayout>({
  label,
  payouts,
  action,
  actionHeading = 'Decision',
}: {
  label: string;
  payouts: P[];
  action?: (p: P) => ComponentChildren;
  actionHeading?: string;
}) {
  if (payouts.length === 0) return <Empty>None.</Empty>;
  return (
    <TableWrap label={label}>
      <thead>
        <tr>
          <th scope="col">Requested</th>
          <th scope="col">Amount</th>
          <th scope="col">Address</th>
          <th scope="col">{action ? actionHeading : 'Transaction'}</th>
        </tr>
      </thead>
      <tbody>
        {payouts.map((p) => (
          <tr key={p.id} data-payout-id={p.id}>
            <td>
              <Time iso={p.createdAt} />
            </td>
            <td>
              {p.amount} {p.currency}
              <div class="muted">on {p.network}</div>
              {p.origin === 'auto_sweep' && <div class="muted">auto-sweep</div>}
            </td>
            <td>
              <code class="wrap">{p.address}</code>
            </td>
            <td>
              {action ? (
                action(p)
              ) : (
                <>
                  <code class="wrap">{p.transactionHash}</code>
                  <div class="muted">{p.confirmations ?? 0} confirmations</div>
                </>
              )}
            </td>
          </tr>
        ))}
      </tbody>
    </TableWrap>
  );
}

function NetworkSection({ network, onChange }: { network: TreasuryNetwork; onChange: () => void }) {
  const id = `treasury-${network.network}`;
  return (
    <section aria-labelledby={id} data-testid={id}>
      <h2 id={id}>{network.network}</h2>
      <p>
        Treasury address: {network.address === null ? <span class="muted">not recorded yet (the processor has not run)</span> : <code class="wrap">{network.address}</code>}
      </p>
      <PauseSwitch network={network} onDone={onChange} />
      <TableWrap label={`${network.network} balances`}>
        <thead>
          <tr>
            <th scope="col">Asset</th>
            <th scope="col">Treasury balance</th>
            <th scope="col">Awaiting sweep</th>
          </tr>
        </thead>
        <tbody>
          {network.balances.map((b) => {
            const sweeps = network.pendingSweeps.find((s) => s.asset === b.asset);
            return (
              <tr key={b.asset}>
                <th scope="row">{b.asset}</th>
                <td>{b.amount ?? <span class="muted">unknown: {b.unavailableReason}</span>}</td>
                <td>{sweeps ? `${sweeps.amount} in ${sweeps.count} deposit${sweeps.count === 1 ? '' : 's'}` : '—'}</td>
              </tr>
            );
          })}
        </tbody>
      </TableWrap>
      <h3>Approval queue</h3>
      <PayoutTable label={`${network.network} approval queue`} payouts={network.approvalQueue} action={(p) => <ApproveButton payout={p} onDone={onChange} />} />
      <h3>In flight</h3>
      <PayoutTable label={`${network.network} payouts in flight`} payouts={network.inFlight} />
      <h3>Refused by the signer</h3>
      <p class="muted">Not sent: reject them in the Operator queue, or raise the signer's limit.</p>
      <PayoutTable
        label={`${network.network} payouts refused by the signer`}
        payouts={network.refusedBySigner}
        actionHeading="Refusal"
        action={(p) => (
          <>
            <span data-testid="signer-refusal">{p.signerRefusal}</span>
            <div class="muted">
              since <Time iso={p.signerRefusedAt} />
            </div>
          </>
        )}
      />
    </section>
  );
}

export function TreasuryPage() {
  const me = useAccount();
  const treasury = useLoad(() => (me.isAdmin ? api.get<{ networks: TreasuryNetwork[] }>('/api/admin/treasury') : Promise.resolve(undefined)), [me.isAdmin]);
  return (
    <>
      <PageHeading title="Treasury" />
      {!me.isAdmin ? (
        <p role="alert">This page is for coinvoice operators only.</p>
      ) : treasury.error ? (
        <ErrorMessage error={treasury.error} />
      ) : !treasury.data ? (
        <Loading what="the treasury" />
      ) : (
        treasury.data.networks.map((n) => <NetworkSection key={n.network} network={n} onChange={treasury.reload} />)
      )}
    </>
  );
}
