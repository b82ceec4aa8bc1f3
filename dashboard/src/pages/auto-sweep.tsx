/**
 * A project's auto-sweep configuration (services/payout/README.md#auto-sweep): per (currency,
 * network) a destination and a threshold. A new destination is confirmed with the code emailed to the
 * merchant; removing one needs no code. Sandbox projects keep the configuration but are never swept.
 */
import { useState } from 'preact/hooks';
import { api, query } from '../api';
import type { AutoSweep, AutoSweepEntry, Balances, Project } from '../types';
import { ErrorMessage, Field, Loading, SelectField, TableWrap, Time, useAction, useLoad } from '../ui';

const CURRENCIES: Array<[string, string]> = ['BTC', 'LTC', 'ETH', 'USDT', 'USDC', 'TRX', 'POL', 'BNB'].map((c) => [c, c]);

/** A rule's identity: its (currency, network). */
const sameRule = (a: { currency: string; network: string }, currency: string, network: string) => a.currency === currency && a.network === network;

export function AutoSweepSection({ project }: { project: Project }) {
  const path = `/api/merchant/projects/${project.id}/auto-sweep`;
  const config = useLoad(() => api.get<AutoSweep>(path), [path]);
  const balances = useLoad(() => api.get<Balances>(`/api/payout/balance${query({ projectId: project.id })}`), [project.id]);
  const [currency, setCurrency] = useState('USDT');
  // The networks the merchant has money or a rule on for the currency; "" sends none: the currency's
  // default network (the service resolves it and refuses a network that does not carry the coin).
  const known = [
    ...new Set([...(config.data?.entries ?? []), ...(balances.data?.balances ?? [])].filter((e) => e.currency === currency).map((e) => e.network)),
  ];
  const [picked, setNetwork] = useState<string | null>(null);
  const network = picked ?? known[0] ?? '';
  const [address, setAddress] = useState('');
  const [threshold, setThreshold] = useState('');
  const [code, setCode] = useState('');
  type Draft = { currency: string; network: string; address: string; threshold: string };
  const put = (entries: Draft[]) =>
    api.put<AutoSweep>(path, { entries: entries.map(({ currency, network, address, threshold }) => ({ currency, ...(network ? { network } : {}), address, threshold })) });
  const save = useAction(async () => {
    const current: AutoSweepEntry[] = config.data?.entries ?? [];
    const chosen = network;
    // A rule on the same (currency, network) is replaced; "" is matched by the service to the default network.
    await put([...current.filter((e) => !chosen || !sameRule(e, currency, chosen)), { currency, network: chosen, address: address.trim(), threshold: threshold.trim() }]);
    setAddress('');
    setThreshold('');
    setNetwork(null);
    config.reload();
  });
  const remove = useAction(async (removed: AutoSweepEntry) => {
    await put((config.data?.entries ?? []).filter((e) => !sameRule(e, removed.currency, removed.network)));
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
        When the available balance of a currency on a network reaches its threshold, the whole balance is paid out to its address (a payout marked auto-sweep).
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
                  <th scope="col">Network</th>
                  <th scope="col">Destination</th>
                  <th scope="col">Threshold</th>
                  <th scope="col">Action</th>
                </tr>
              </thead>
              <tbody>
                {config.data.entries.map((e) => (
                  <tr key={`${e.currency}-${e.network}`} data-testid="auto-sweep-rule">
                    <th scope="row">{e.currency}</th>
                    <td>{e.network}</td>
                    <td>
                      <code class="wrap">{e.address}</code>
                    </td>
                    <td>{e.threshold}</td>
                    <td>
                      <button type="button" class="danger" disabled={remove.busy} onClick={() => void remove.run(e)} aria-label={`Remove the ${e.currency} auto-sweep on ${e.network}`}>
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
                {config.data.pendingChange.entries.map((e) => `${e.currency} on ${e.network} to ${e.address} from ${e.threshold}`).join('; ')}. It expires{' '}
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
              <SelectField
                label="Auto-sweep currency"
                value={currency}
                onValue={(c) => {
                  setCurrency(c);
                  setNetwork(null);
                }}
                options={CURRENCIES}
              />
              <SelectField label="Auto-sweep network" value={network} onValue={setNetwork} options={[['', 'Default network'], ...known.map((n): [string, string] => [n, n])]} />
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
