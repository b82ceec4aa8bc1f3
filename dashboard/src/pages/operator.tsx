import { useState } from 'preact/hooks';
import { api, query } from '../api';
import { useAccount } from '../account';
import type { OperatorPayout, Page, Payout } from '../types';
import { Empty, ErrorMessage, Field, Loading, PageHeading, Pager, TableWrap, Time, useAction, useLoad, usePager } from '../ui';

/**
 * An unclaimed payout offers "Start sending" (the claim: from then on the merchant cannot cancel
 * it); only a claimed one takes the transaction hash. Send the coins after the claim, never before.
 */
function Decide({ payout, onDone }: { payout: Payout; onDone: () => void }) {
  const [hash, setHash] = useState('');
  const [note, setNote] = useState('');
  const claim = useAction(async () => {
    await api.post<Payout>(`/api/admin/payouts/${payout.id}/claim`);
    onDone();
  });
  const approve = useAction(async () => {
    await api.post<Payout>(`/api/admin/payouts/${payout.id}/approve`);
    onDone();
  });
  const complete = useAction(async () => {
    await api.post<Payout>(`/api/admin/payouts/${payout.id}/complete`, { transactionHash: hash.trim() });
    onDone();
  });
  const reject = useAction(async () => {
    await api.post<Payout>(`/api/admin/payouts/${payout.id}/reject`, { adminNote: note.trim() });
    onDone();
  });
  const label = `${payout.amount} ${payout.currency}`;
  // Claimed and already carrying a transaction: the treasury's processor is sending it, and the
  // chain finishes it (an operator's Complete or Reject answers 409 payout_sent_by_processor).
  if (payout.processing && payout.transactionHash) {
    return (
      <div class="decide" data-testid="sent-by-processor">
        <span class="muted">
          Sent on chain by the treasury: <code>{payout.transactionHash}</code>, {payout.confirmations ?? 0} confirmation
          {payout.confirmations === 1 ? '' : 's'}
        </span>
      </div>
    );
  }
  // One stable tree whether claimed or not: the hash field stays mounted (disabled until the claim),
  // so its label keeps pointing at it.
  return (
    <div class="decide">
      <form
        class="inline-form"
        onSubmit={(e) => {
          e.preventDefault();
          void complete.run();
        }}
      >
        {/* Approve: the treasury's processor then sends it (docs/treasury.md); by hand, Start sending. */}
        {!payout.processing && !payout.approvedAt && (
          <button type="button" disabled={approve.busy} onClick={() => void approve.run()} aria-label={`Approve ${label}`}>
            Approve
          </button>
        )}
        {payout.approvedAt && !payout.processing && (
          <span class="muted" data-testid="approved">
            Approved <Time iso={payout.approvedAt} />
          </span>
        )}
        {!payout.processing && (
          <button type="button" class="primary" disabled={claim.busy} onClick={() => void claim.run()} aria-label={`Start sending ${label}`}>
            Start sending
          </button>
        )}
        <Field
          label={`Transaction hash for ${label}`}
          required
          disabled={!payout.processing}
          spellcheck={false}
          autoComplete="off"
          value={hash}
          onValue={setHash}
        />
        <button type="submit" class="primary" disabled={!payout.processing || complete.busy}>
          Complete
        </button>
        <ErrorMessage error={approve.error ?? claim.error ?? complete.error} />
      </form>
      <form
        class="inline-form"
        onSubmit={(e) => {
          e.preventDefault();
          void reject.run();
        }}
      >
        <Field label={`Rejection note for ${label}`} required maxLength={500} value={note} onValue={setNote} />
        <button type="submit" class="danger" disabled={reject.busy}>
          Reject
        </button>
        <ErrorMessage error={reject.error} />
      </form>
    </div>
  );
}

export function OperatorPage() {
  const me = useAccount();
  const pager = usePager();
  const queue = useLoad(
    () =>
      me.isAdmin
        ? api.get<Page<OperatorPayout>>(`/api/admin/payouts${query({ status: 'Pending', environment: 'live', limit: 20, cursor: pager.cursor })}`)
        : Promise.resolve(undefined),
    [me.isAdmin, pager.cursor],
  );
  return (
    <>
      <PageHeading title="Operator queue" />
      {!me.isAdmin ? (
        <p role="alert">This page is for coinvoice operators only.</p>
      ) : queue.error ? (
        <ErrorMessage error={queue.error} />
      ) : !queue.data ? (
        <Loading what="the payout queue" />
      ) : queue.data.items.length === 0 ? (
        <Empty>No live payout is waiting: the queue is empty.</Empty>
      ) : (
        <>
          <p>Pending live payouts, oldest first. Approve a payout to let the treasury send it on chain (payouts above the automatic maximum wait for it). To send by hand, press Start sending before you send the funds (the merchant can no longer cancel the payout), then complete it with the transaction hash; or reject it with a note if nothing was sent.</p>
          <TableWrap label="Pending live payouts">
            <thead>
              <tr>
                <th scope="col">Requested</th>
                <th scope="col">Amount</th>
                <th scope="col">Address</th>
                <th scope="col">Project</th>
                <th scope="col">Decision</th>
              </tr>
            </thead>
            <tbody>
              {queue.data.items.map((p) => (
                <tr key={p.id} data-testid="queue-row" data-payout-id={p.id}>
                  <td>
                    <Time iso={p.createdAt} />
                  </td>
                  <td>
                    {p.amount} {p.currency}
                    <div class="muted">on {p.network}</div>
                    {p.note && <div class="muted">{p.note}</div>}
                    {p.origin === 'auto_sweep' && <div class="muted">auto-sweep</div>}
                    {p.transactionHash && (
                      <div class="muted">
                        sent <code class="wrap">{p.transactionHash}</code> · {p.confirmations ?? 0} confirmations
                      </div>
                    )}
                  </td>
                  <td>
                    <code class="wrap">{p.address}</code>
                  </td>
                  <td>
                    <code>{p.projectId}</code>
                  </td>
                  <td>
                    <Decide payout={p} onDone={queue.reload} />
                  </td>
                </tr>
              ))}
            </tbody>
          </TableWrap>
          <Pager pager={pager} nextCursor={queue.data.nextCursor} label="Queue" />
        </>
      )}
    </>
  );
}
