/** Every project page: the project's name and environment, and tabs to its sections. */
import type { ComponentChildren } from 'preact';
import { Link, useRoute } from 'wouter-preact';
import { api } from './api';
import type { Project } from './types';
import { ErrorMessage, Loading, PageHeading, useLoad } from './ui';

const SECTIONS: Array<[path: string, label: string]> = [
  ['', 'Settings'],
  ['/keys', 'API keys'],
  ['/invoices', 'Invoices'],
  ['/webhooks', 'Webhooks'],
  ['/payouts', 'Payouts'],
];

function Tab({ projectId, path, label }: { projectId: string; path: string; label: string }) {
  const href = `/projects/${projectId}${path}`;
  const [active] = useRoute(href);
  return (
    <Link href={href} aria-current={active ? 'page' : undefined}>
      {label}
    </Link>
  );
}

export function ProjectFrame({
  projectId,
  section,
  children,
}: {
  projectId: string;
  section: string;
  children: (project: Project, reload: () => void) => ComponentChildren;
}) {
  const project = useLoad(() => api.get<Project>(`/api/merchant/projects/${projectId}`), [projectId]);
  const title = project.data ? `${section} — ${project.data.name}` : section;
  return (
    <>
      <PageHeading title={title}>
        {project.data && (
          <span class={`badge badge-${project.data.environment}`} data-testid="project-environment">
            {project.data.environment}
          </span>
        )}
      </PageHeading>
      <nav class="tabs" aria-label="Project sections">
        {SECTIONS.map(([path, label]) => (
          <Tab key={path} projectId={projectId} path={path} label={label} />
        ))}
      </nav>
      {project.error ? <ErrorMessage error={project.error} /> : project.data ? children(project.data, project.reload) : <Loading what="the project" />}
    </>
  );
}
