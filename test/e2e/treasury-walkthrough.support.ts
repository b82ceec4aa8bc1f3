/** What the treasury walkthroughs (Ethereum, Bitcoin) share: a payout requested through the API and verified with its emailed code. */
import { codeInMail, mailText } from '../../deploy/local/src/mailbox';
import { apiKeyHeader, type GatewayClient, type ProjectFixture } from '../support/http';
import type { BootedSystem } from '../support/system';
import { eventually } from './webhooks.support';

/** A payout requested, verified with the emailed code, and answered as the API answers it; its id. */
export async function requestVerifiedPayout(
  world: { api: GatewayClient; system: BootedSystem; project: ProjectFixture },
  request: { amount: number; currency: string; address: string },
): Promise<string> {
  const { api, system, project } = world;
  const requested = await api.post('/api/payout/request', request, { headers: apiKeyHeader(project.key) });
  expect(requested.status).toBe(201);
  const payoutId = requested.body.id as string;
  const code = await eventually(async () => {
    const mail = system.mail.messages().find((raw) => mailText(raw).includes(payoutId));
    return mail ? codeInMail(mailText(mail)) : undefined;
  }, 20_000, `the code email of ${payoutId}`);
  const verified = await api.post('/api/payout/verify', { payoutId, code }, { headers: apiKeyHeader(project.key) });
  expect(verified.status).toBe(200);
  return payoutId;
}
