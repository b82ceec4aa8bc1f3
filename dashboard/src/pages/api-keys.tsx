import { useState } from 'preact/hooks';
import { api } from '../api';
import { ProjectFrame } from '../project-frame';
import type { ApiKey, Project } from '../types';
import { VerifyEmailBanner } from '../verify-email';
import { Empty, ErrorMessage, Field, Loading, SecretOnce, TableWrap, Time, useAction, useLoad } from '../ui';

function RevokeKey({ project, apiKey, onRevoked }: { project: Project; apiKey: ApiKey; onRevoked: () => void }) {
  const [confirming, setConfirming] = useState(false);
  const action = useAction(async () => {
    await api.delete(`/api/merchant/projects/${project.id}/api-keys/${apiKey.id}`);
    onRevoked();
  });
  if (!confirming) {
    return (
      <button type="button" class="danger" onClick={() => setConfirming(true)} aria-label={`Revoke key ${apiKey.name}`}>
        Revoke
      </button>
    );
  }
  return (
    <div class="confirm" role="group" aria-label={`Confirm revoking ${apiKey.name}`}>
      <p>Requests with this key fail at once. Revoke it?</p>
      <button type="button" class="danger" disabled={action.busy} onClick={() => void action.run()}>
        Yes, revoke {apiKey.name}
      </button>
      <button type="button" onClick={() => setConfirming(false)}>
        Keep the key
      </button>
      <ErrorMessage error={action.error} />
    </div>
  );
}

function Keys({ project }: { project: Project }) {
  const keys = useLoad(() => api.get<{ items: ApiKey[] }>(`/api/merchant/projects/${project.id}/api-keys`), [project.id]);
  const [name, setName] = useState('');
  const [created, setCreated] = useState<{ key: string; name: string } | null>(null);
  const create = useAction(async () => {
    const res = await api.post<{ key: string; name: string }>(`/api/merchant/projects/${project.id}/api-keys`, { name });
    setCreated(res);
    setName('');
    keys.reload();
  });
  return (
    <>
      <section aria-labelledby="create-key">
        <h2 id="create-key">Create an API key</h2>
        <form
          onSubmit={(e) => {
            e.preventDefault();
            void create.run();
          }}
        >
          <Field label="Key name" required value={name} onValue={setName} hint="What uses it, e.g. “shop backend”." />
          <ErrorMessage error={create.error} />
          <button type="submit" class="primary" disabled={create.busy}>
            Create API key
          </button>
        </form>
        {created && (
          <SecretOnce
            label="API key"
            secret={created.key}
            testId="api-key"
            warning={`Copy the key “${created.name}” now and keep it on your server only: coinvoice stores just its hash and cannot show it again.`}
          />
        )}
      </section>
      <section aria-labelledby="key-list">
        <h2 id="key-list">Keys</h2>
        {keys.error ? (
          <ErrorMessage error={keys.error} />
        ) : !keys.data ? (
          <Loading what="API keys" />
        ) : keys.data.items.length === 0 ? (
          <Empty>No keys yet.</Empty>
        ) : (
          <TableWrap label="API keys">
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Prefix</th>
                <th scope="col">Created</th>
                <th scope="col">Last used</th>
                <th scope="col">State</th>
              </tr>
            </thead>
            <tbody>
              {keys.data.items.map((k) => (
                <tr key={k.id} data-testid="api-key-row">
                  <td>{k.name}</td>
                  <td>
                    <code>{k.prefix}…</code>
                  </td>
                  <td>
                    <Time iso={k.createdAt} />
                  </td>
                  <td>{k.lastUsedAt ? <Time iso={k.lastUsedAt} /> : <span class="muted">never</span>}</td>
                  <td>
                    {k.revokedAt ? (
                      <span>
                        Revoked <Time iso={k.revokedAt} />
                      </span>
                    ) : (
                      <RevokeKey project={project} apiKey={k} onRevoked={keys.reload} />
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </TableWrap>
        )}
      </section>
    </>
  );
}

export function ApiKeysPage({ params }: { params: { id: string } }) {
  return (
    <ProjectFrame projectId={params.id} section="API keys">
      {(project) => (
        <>
          {project.environment === 'live' && <VerifyEmailBanner />}
          <Keys project={project} />
        </>
      )}
    </ProjectFrame>
  );
}
