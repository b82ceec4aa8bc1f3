/**
 * A project's auto-sweep configuration (services/payout/README.md#auto-sweep): per currency a
 * destination and a threshold. A new destination is confirmed with the code emailed to the
 * merchant; removing one needs no code. Sandbox projects keep the configuration but are never swept.
 */
import { useState } from 'preact/hooks';
import { api } from '../api';
import type { AutoSweep, AutoSweepEntry, Project } from '../types';
import { ErrorMessage, Field, Loading, SelectField, TableWrap, Time, useAction, useLoad } from '../ui';

const CURRENCIES: Array<[string, string]> = ['BTC', 'LTC', 'ETH', 'USDT', 'USDC', 'TRX'].map((c) => [c, c]);

export function AutoSweepSection({ project }: { project: Project }) {
  const path = `/api/merchant/projects/${project.id}/auto-sweep`;
  const config = useLoad(() => api.get<AutoSweep>(path), [path]);
  const [currency, setCurrency] = useState('USDT');
  const [address, setAddress] = useState('');
  const [threshold, setThreshold] = useState('');
  const [code, setCode] = useState('');
  const put = (entries: AutoSweepEntry[]) => api.put<AutoSweep>(path, { entries: entries.map(({ currency, address, threshold }) => ({ currency, address, threshold })) });
  const save = useAction(async () => {
    const current = config.data?.entries ?? [];
    await put([...current.filter((e) => e.currency !== currency), { currency, address: address.trim(), threshold: threshold.trim() }]);
    setAddress('');
    setThreshold('');
    config.reload();
  });
  const remove = useAction(async (removed: string) => {
    await put((config.data?.entries ?? []).filter((e) => e.currency !== removed));
    config.reload();
  });
  const verify = useAction(async () => {
    await api.post<AutoSweep>(`${path}/verify`, { code: code.trim() });
    setCode('');
    config.reload();
  });
  return (
    <section aria-labelledby="auto-sweep">
      <h2 id="auto-sweep">Auto-sweep</h2>
      <p>
        When the available balance of a currency reaches its threshold, the whole balance is paid out to its address (a payout marked auto-sweep).
        {project.environment === 'sandbox' && ' This is a sandbox project: the configuration is kept but never carried out.'}
      </p>
      {config.error ? (
        <ErrorMessage error={config.error} />
      ) : !config.data ? (
        <Loading what="the auto-sweep configuration" />
      ) : (
        <>
          {config.data.entries.length === 0 ? (
            <p class="muted">No auto-sweep is set.</p>
          ) : (
            <TableWrap label="Auto-sweep rules">
              <thead>
                <tr>
                  <th scope="col">Currency</th>
                  <th scope="col">Destination</th>
                  <th scope="col">Threshold</th>
                  <th scope="col">Action</th>
                </tr>
              </thead>
              <tbody>
                {config.data.entries.map((e) => (
                  <tr key={e.currency} data-testid="auto-sweep-rule">
                    <th scope="row">{e.currency}</th>
                    <td>
                      <code class="wrap">{e.address}</code>
                    </td>
                    <td>{e.threshold}</td>
                    <td>
                      <button type="button" class="danger" disabled={remove.busy} onClick={() => void remove.run(e.currency)} aria-label={`Remove the ${e.currency} auto-sweep`}>
                        Remove
                      </button>
                    </td>
                  </tr>
                ))}
              </tbody>
            </TableWrap>
          )}
          <ErrorMessage error={remove.error} />
          {config.data.pendingChange && (
            <form
              class="confirm"
              aria-label="Confirm the auto-sweep change"
              onSubmit={(e) => {
                e.preventDefault();
                void verify.run();
              }}
            >
              <p>
                We emailed you a code to confirm{' '}
                {config.data.pendingChange.entries.map((e) => `${e.currency} to ${e.address} from ${e.threshold}`).join('; ')}. It expires{' '}
                <Time iso={config.data.pendingChange.expiresAt} />.
              </p>
              <Field label="Auto-sweep verification code" required inputMode="numeric" autoComplete="one-time-code" maxLength={6} value={code} onValue={setCode} />
              <button type="submit" class="primary" disabled={verify.busy}>
                Confirm auto-sweep
              </button>
              <ErrorMessage error={verify.error} />
            </form>
          )}
          <form
            onSubmit={(e) => {
              e.preventDefault();
              void save.run();
            }}
          >
            <div class="grid">
              <SelectField label="Auto-sweep currency" value={currency} onValue={setCurrency} options={CURRENCIES} />
              <Field label="Destination address" required spellcheck={false} autoComplete="off" value={address} onValue={setAddress} />
              <Field label="Threshold" required inputMode="decimal" value={threshold} onValue={setThreshold} />
            </div>
            <ErrorMessage error={save.error} />
            <button type="submit" class="primary" disabled={save.busy}>
              Save auto-sweep
            </button>
          </form>
        </>
      )}
    </section>
  );
}
