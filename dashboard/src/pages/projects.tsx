import { useState } from 'preact/hooks';
import { Link } from 'wouter-preact';
import { api } from '../api';
import type { Project } from '../types';
import { Empty, ErrorMessage, Field, Loading, PageHeading, SecretOnce, SelectField, TableWrap, Time, useAction, useLoad } from '../ui';

function CreateProject({ onCreated }: { onCreated: () => void }) {
  const [name, setName] = useState('');
  const [environment, setEnvironment] = useState('sandbox');
  const [webhookUrl, setWebhookUrl] = useState('');
  const [lifetime, setLifetime] = useState('60');
  const [tolerance, setTolerance] = useState('0');
  const [created, setCreated] = useState<(Project & { webhookSecret: string }) | null>(null);
  const action = useAction(async () => {
    const body: Record<string, unknown> = { name, environment, paymentTolerancePercent: Number(tolerance) };
    if (webhookUrl.trim()) body.webhookUrl = webhookUrl.trim();
    let project = await api.post<Project & { webhookSecret: string }>('/api/merchant/projects', body);
    // The lifetime is not a creation field: it is applied right after, as an edit.
    if (Number(lifetime) !== project.invoiceLifetimeMinutes) {
      project = { ...(await api.patch<Project>(`/api/merchant/projects/${project.id}`, { invoiceLifetimeMinutes: Number(lifetime) })), webhookSecret: project.webhookSecret };
    }
    setCreated(project);
    setName('');
    setWebhookUrl('');
    onCreated();
  });
  return (
    <section aria-labelledby="create-project">
      <h2 id="create-project">Create a project</h2>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          void action.run();
        }}
      >
        <div class="grid">
          <Field label="Project name" required value={name} onValue={setName} />
          <SelectField
            label="Environment"
            value={environment}
            onValue={setEnvironment}
            options={[
              ['sandbox', 'Sandbox (test payments, SBX_ keys)'],
              ['live', 'Live (real payments, LIVE_ keys)'],
            ]}
          />
          <Field label="Webhook URL" type="url" placeholder="https://shop.example/coinvoice" value={webhookUrl} onValue={setWebhookUrl} hint="Optional: receives signed invoice and payout events." />
          <Field label="Invoice lifetime (minutes)" type="number" min={5} max={10080} required value={lifetime} onValue={setLifetime} />
          <Field
            label="Payment tolerance (%)"
            type="number"
            min={0}
            max={5}
            step="0.01"
            value={tolerance}
            onValue={setTolerance}
            hint="How far below the expected amount a payment still counts as paid (0 to 5)."
          />
        </div>
        <ErrorMessage error={action.error} />
        <button type="submit" class="primary" disabled={action.busy}>
          Create project
        </button>
      </form>
      {created && (
        <div class="notice" role="status">
          <p>
            Project <Link href={`/projects/${created.id}`}>{created.name}</Link> created.
          </p>
          <SecretOnce
            label="Webhook secret"
            secret={created.webhookSecret}
            testId="webhook-secret"
            warning="Store this signing secret now: you verify every webhook with it. You can rotate it later, but not see it again."
          />
        </div>
      )}
    </section>
  );
}

export function ProjectsPage() {
  const projects = useLoad(() => api.get<{ items: Project[] }>('/api/merchant/projects'), []);
  return (
    <>
      <PageHeading title="Projects" />
      <section aria-labelledby="your-projects">
        <h2 id="your-projects">Your projects</h2>
        {projects.error ? (
          <ErrorMessage error={projects.error} />
        ) : !projects.data ? (
          <Loading what="projects" />
        ) : projects.data.items.length === 0 ? (
          <Empty>No projects yet. Create a sandbox project to try payments without real money.</Empty>
        ) : (
          <TableWrap label="Projects">
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Environment</th>
                <th scope="col">Webhook URL</th>
                <th scope="col">Created</th>
              </tr>
            </thead>
            <tbody>
              {projects.data.items.map((p) => (
                <tr key={p.id}>
                  <td>
                    <Link href={`/projects/${p.id}`}>{p.name}</Link>
                  </td>
                  <td>
                    <span class={`badge badge-${p.environment}`}>{p.environment}</span>
                  </td>
                  <td class="wrap">{p.webhookUrl ?? <span class="muted">none</span>}</td>
                  <td>
                    <Time iso={p.createdAt} />
                  </td>
                </tr>
              ))}
            </tbody>
          </TableWrap>
        )}
      </section>
      <CreateProject onCreated={projects.reload} />
    </>
  );
}
