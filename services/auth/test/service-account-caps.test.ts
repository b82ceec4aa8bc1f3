/**
 * What one account may hold (an outside review created 25 projects and 37 keys on one project, each
 * multiplying the per-project and per-key limits): MAX_PROJECTS_PER_MERCHANT projects,
 * MAX_ACTIVE_API_KEYS_PER_PROJECT unrevoked keys per project — held under concurrent creation, a
 * revoked key freeing its place, another merchant or project unaffected.
 */
import { Code } from '@coinvoice/runtime';
import { Environment } from '@coinvoice/runtime/gen/coinvoice/common/v1/environment_pb';
import { register, rpcError, startAuth, type StartedAuth } from './support/auth';

let auth: StartedAuth;

beforeAll(async () => {
  auth = await startAuth({ env: { MAX_PROJECTS_PER_MERCHANT: '3', MAX_ACTIVE_API_KEYS_PER_PROJECT: '2', RATE_LIMIT_API_KEY_CREATE_PER_PROJECT: '14/1h' } });
});

afterAll(async () => {
  await auth?.dispose();
});

const newProject = (merchantId: string, name = 'Shop') => auth.client.createProject({ merchantId, name, environment: Environment.SANDBOX });

test('12 concurrent project creations of one merchant: exactly 3 made, the rest 409 too_many_projects; another merchant is not affected', async () => {
  const merchant = (await register(auth)).merchant.id;
  const outcomes = await Promise.allSettled(Array.from({ length: 12 }, (_, i) => newProject(merchant, `Shop ${i}`)));
  expect(outcomes.filter((o) => o.status === 'fulfilled')).toHaveLength(3);
  const refused = await rpcError(newProject(merchant));
  expect(refused).toMatchObject({ connectCode: Code.FailedPrecondition, code: 'too_many_projects', message: 'an account has at most 3 projects' });
  for (const outcome of outcomes) {
    if (outcome.status === 'rejected') expect(await rpcError(Promise.reject(outcome.reason))).toMatchObject({ code: 'too_many_projects' });
  }
  expect((await auth.client.listProjects({ merchantId: merchant })).projects).toHaveLength(3);
  const other = (await register(auth)).merchant.id;
  expect((await newProject(other)).project).toBeDefined();
});

test('10 concurrent key creations on one project: exactly 2 made; revoking one frees its place; another project is not affected', async () => {
  const merchant = (await register(auth)).merchant.id;
  const project = (await newProject(merchant)).project!;
  const create = (projectId = project.id) => auth.client.createApiKey({ merchantId: merchant, projectId, name: 'backend' });
  const outcomes = await Promise.allSettled(Array.from({ length: 10 }, () => create()));
  const made = outcomes.flatMap((o) => (o.status === 'fulfilled' ? [o.value] : []));
  expect(made).toHaveLength(2);
  expect(await rpcError(create())).toMatchObject({
    connectCode: Code.FailedPrecondition,
    code: 'too_many_api_keys',
    message: 'a project has at most 2 active API keys: revoke one first',
  });
  await auth.client.revokeApiKey({ merchantId: merchant, projectId: project.id, keyId: made[0]!.apiKey!.id });
  expect((await create()).key).toMatch(/^SBX_/);
  expect(await rpcError(create())).toMatchObject({ code: 'too_many_api_keys' });
  // The revoked key stays listed; two are active.
  const keys = (await auth.client.listApiKeys({ merchantId: merchant, projectId: project.id })).apiKeys;
  expect(keys).toHaveLength(3);
  expect(keys.filter((k) => k.revokedAt === undefined)).toHaveLength(2);
  const second = (await newProject(merchant, 'Second')).project!;
  expect((await create(second.id)).key).toMatch(/^SBX_/);
});

test('revoke-and-create cannot mint fresh per-key allowances without end: RATE_LIMIT_API_KEY_CREATE_PER_PROJECT counts every creation', async () => {
  const merchant = (await register(auth)).merchant.id;
  const project = (await newProject(merchant)).project!;
  const outcomes: string[] = [];
  for (let i = 0; i < 16; i++) {
    try {
      const { apiKey } = await auth.client.createApiKey({ merchantId: merchant, projectId: project.id, name: `k${i}` });
      outcomes.push('created');
      await auth.client.revokeApiKey({ merchantId: merchant, projectId: project.id, keyId: apiKey!.id });
    } catch (err) {
      outcomes.push((await rpcError(Promise.reject(err))).code);
    }
  }
  // The earlier test's key creations were another project's: this one has its own 14.
  expect(outcomes).toEqual([...Array(14).fill('created'), 'rate_limited', 'rate_limited']);
});
