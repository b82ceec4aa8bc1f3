import { useEffect, useRef, useState } from 'preact/hooks';
import { Link } from 'wouter-preact';
import { api } from '../api';
import type { Project } from '../types';
import { VerifyEmailBanner } from '../verify-email';
import { Empty, ErrorMessage, Field, Loading, PageHeading, SecretOnce, SelectField, TableWrap, Time, useAction, useLoad } from '../ui';

type CreatedProject = Project & { webhookSecret: string };

/**
 * The new project's one-time webhook secret, at the top of the page where it cannot be missed
 * (the form is far below the fold once a merchant has a few projects): scrolled to and focused.
 */
function CreatedNotice({ project }: { project: CreatedProject }) {
  const ref = useRef<HTMLDivElement>(null);
  useEffect(() => {
    ref.current?.scrollIntoView({ block: 'start' });
    ref.current?.focus({ preventScroll: true });
  }, [project.id]);
  return (
    <div class="notice" role="status" tabIndex={-1} ref={ref} data-testid="project-created">
      <p>
        Project <Link href={`/projects/${project.id}`}>{project.name}</Link> created.
      </p>
      <SecretOnce
        label="Webhook secret"
        secret={project.webhookSecret}
        testId="webhook-secret"
        warning="Store this signing secret now: you verify every webhook with it. You can rotate it later, but not see it again."
      />
    </div>
  );
}

function CreateProject({ onCreated }: { onCreated: (project: CreatedProject) => void }) {
  const [name, setName] = useState('');
  const [environment, setEnvironment] = useState('sandbox');
  const [webhookUrl, setWebhookUrl] = useState('');
  const [lifetime, setLifetime] = useState('60');
  const [tolerance, setTolerance] = useState('0');
  const action = useAction(async () => {
    const body: Record<string, unknown> = { name, environment, paymentTolerancePercent: Number(tolerance) };
    if (webhookUrl.trim()) body.webhookUrl = webhookUrl.trim();
    let project = await api.post<Project & { webhookSecret: string }>('/api/merchant/projects', body);
    // The lifetime is not a creation field: it is applied right after, as an edit.
    if (Number(lifetime) !== project.invoiceLifetimeMinutes) {
      project = { ...(await api.patch<Project>(`/api/merchant/projects/${project.id}`, { invoiceLifetimeMinutes: Number(lifetime) })), webhookSecret: project.webhookSecret };
    }
    setName('');
    setWebhookUrl('');
    onCreated(project);
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
    </section>
  );
}

export function ProjectsPage() {
  const projects = useLoad(() => api.get<{ items: Project[] }>('/api/merchant/projects'), []);
  const [created, setCreated] = useState<CreatedProject | null>(null);
  return (
    <>
      <PageHeading title="Projects" />
      {created && <CreatedNotice project={created} />}
      <VerifyEmailBanner />
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
      <CreateProject
        onCreated={(project) => {
          setCreated(project);
          projects.reload();
        }}
      />
    </>
  );
}
