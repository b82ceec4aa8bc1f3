import { useState } from 'preact/hooks';
import { api } from '../api';
import { ProjectFrame } from '../project-frame';
import { AutoSweepSection } from './auto-sweep';
import type { Project } from '../types';
import { ErrorMessage, Field, SecretOnce, SelectField, Time, useAction } from '../ui';

function EditProject({ project, onSaved }: { project: Project; onSaved: () => void }) {
  const [name, setName] = useState(project.name);
  const [webhookUrl, setWebhookUrl] = useState(project.webhookUrl ?? '');
  const [lifetime, setLifetime] = useState(String(project.invoiceLifetimeMinutes));
  const [tolerance, setTolerance] = useState(String(project.paymentTolerancePercent));
  const [saved, setSaved] = useState(false);
  const action = useAction(async () => {
    setSaved(false);
    const body = {
      name,
      webhookUrl: webhookUrl.trim() === '' ? null : webhookUrl.trim(),
      invoiceLifetimeMinutes: Number(lifetime),
      paymentTolerancePercent: Number(tolerance),
    };
    await api.patch<Project>(`/api/merchant/projects/${project.id}`, body);
    setSaved(true);
    onSaved();
  });
  return (
    <section aria-labelledby="edit-project">
      <h2 id="edit-project">Settings</h2>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          void action.run();
        }}
      >
        <div class="grid">
          <Field label="Project name" required value={name} onValue={setName} />
          <Field label="Webhook URL" type="url" value={webhookUrl} onValue={setWebhookUrl} hint="Leave empty to stop sending webhooks." />
          <Field label="Invoice lifetime (minutes)" type="number" min={5} max={10080} required value={lifetime} onValue={setLifetime} />
          <Field label="Payment tolerance (%)" type="number" min={0} max={5} step="0.01" value={tolerance} onValue={setTolerance} />
        </div>
        <ErrorMessage error={action.error} />
        <button type="submit" class="primary" disabled={action.busy}>
          Save settings
        </button>
        <span role="status" aria-live="polite" class="muted">
          {saved ? ' Saved.' : ''}
        </span>
      </form>
      <p class="muted">
        Created <Time iso={project.createdAt} /> · project id <code>{project.id}</code>
      </p>
    </section>
  );
}

/** How long the replaced secret keeps signing next to the new one (docs/webhook-delivery.md#secret-rotation). */
const OVERLAP_CHOICES: Array<[minutes: string, label: string]> = [
  ['1440', '24 hours'],
  ['60', '1 hour'],
  ['0', 'Stop it now (the old secret leaked)'],
];

function RotateSecret({ project, onChanged }: { project: Project; onChanged: () => void }) {
  const [confirming, setConfirming] = useState(false);
  const [overlap, setOverlap] = useState(OVERLAP_CHOICES[0]![0]);
  const [secret, setSecret] = useState<string | null>(null);
  const rotate = useAction(async () => {
    const res = await api.post<{ webhookSecret: string }>(`/api/merchant/projects/${project.id}/webhook-secret/rotate`, { previousSecretExpiresInMinutes: Number(overlap) });
    setSecret(res.webhookSecret);
    setConfirming(false);
    onChanged();
  });
  const endPrevious = useAction(async () => {
    await api.delete(`/api/merchant/projects/${project.id}/webhook-secret/previous`);
    onChanged();
  });
  return (
    <section aria-labelledby="rotate-secret">
      <h2 id="rotate-secret">Webhook signing secret</h2>
      <p>
        Rotating creates a new secret that signs every webhook from then on. The old one can keep signing next to it (a second <code>v1,</code> signature)
        for a while, so your endpoint accepts webhooks with either secret while you deploy the new one.
      </p>
      {project.previousWebhookSecretExpiresAt && (
        <div class="confirm" role="group" aria-label="Replaced secrets">
          <p data-testid="previous-secret">
            Replaced secrets also sign webhooks, the last of them until <Time iso={project.previousWebhookSecretExpiresAt} />.
          </p>
          <button type="button" disabled={endPrevious.busy} onClick={() => void endPrevious.run()}>
            Stop the replaced secrets now
          </button>
          <ErrorMessage error={endPrevious.error} />
        </div>
      )}
      {!confirming ? (
        <button type="button" onClick={() => setConfirming(true)}>
          Rotate webhook secret
        </button>
      ) : (
        <div class="confirm" role="group" aria-label="Confirm rotation">
          <SelectField label="The old secret keeps signing for" value={overlap} onValue={setOverlap} options={OVERLAP_CHOICES} />
          <p>{overlap === '0' ? 'Your endpoint will reject webhooks until it uses the new secret.' : 'Deploy the new secret before then.'} Rotate now?</p>
          <button type="button" class="danger" disabled={rotate.busy} onClick={() => void rotate.run()}>
            Yes, rotate the secret
          </button>
          <button type="button" onClick={() => setConfirming(false)}>
            Keep the current secret
          </button>
        </div>
      )}
      <ErrorMessage error={rotate.error} />
      {secret && (
        <SecretOnce label="Webhook secret" secret={secret} testId="webhook-secret" warning="Store the new signing secret now; it is not shown again." />
      )}
    </section>
  );
}

export function ProjectSettingsPage({ params }: { params: { id: string } }) {
  return (
    <ProjectFrame projectId={params.id} section="Settings">
      {(project, reload) => (
        <>
          <EditProject project={project} onSaved={reload} />
          <RotateSecret project={project} onChanged={reload} />
          <AutoSweepSection project={project} />
        </>
      )}
    </ProjectFrame>
  );
}
