/**
 * docs/examples/webhook-receiver.mjs, the receiver the README's walkthroughs run: it verifies a
 * delivery signed as the notifier signs it (204, printed), refuses an altered one (400), and says
 * what is missing without a secret.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import path from 'node:path';
import { generateWebhookSecret, webhookDeliveryHeaders } from '../../services/notifier/src/domain/signing';
import { REPO_ROOT } from '../support/system';

const RECEIVER = path.join(REPO_ROOT, 'docs', 'examples', 'webhook-receiver.mjs');
const children: ChildProcessWithoutNullStreams[] = [];

afterAll(() => {
  for (const child of children) child.kill('SIGTERM');
});

function start(env: Record<string, string>) {
  const child = spawn(process.execPath, [RECEIVER], { env: { ...process.env, ...env } });
  children.push(child);
  let output = '';
  child.stdout.on('data', (c: Buffer) => (output += c.toString()));
  child.stderr.on('data', (c: Buffer) => (output += c.toString()));
  const waitFor = async (pattern: RegExp): Promise<RegExpExecArray> => {
    const deadline = Date.now() + 10_000;
    for (;;) {
      const match = pattern.exec(output);
      if (match) return match;
      if (Date.now() > deadline) throw new Error(`the receiver printed no ${pattern}:\n${output}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  };
  return { child, waitFor };
}

test('verifies a signed delivery and prints it; refuses an altered one', async () => {
  const secret = generateWebhookSecret();
  const receiver = start({ COINVOICE_WEBHOOK_SECRET: secret, PORT: '0' });
  const url = (await receiver.waitFor(/receiving webhooks on (http:\/\/127\.0\.0\.1:\d+)\//))[1]!;
  const body = JSON.stringify({ invoiceId: '5b0f7d1e-3c9a-4e44-9d7c-2f3a1b6c8e90', status: 'Paid' });
  // As the delivery worker sends them; fetch computes content-length from what it sends.
  const { 'content-length': _length, ...headers } = webhookDeliveryHeaders({ id: 'evt-1', eventType: 'invoice.paid', timestamp: new Date(), body, secrets: [secret] });

  const ok = await fetch(`${url}/coinvoice`, { method: 'POST', headers, body });
  expect(ok.status).toBe(204);
  await receiver.waitFor(/verified invoice\.paid \[evt-1\] \{"invoiceId":"5b0f7d1e-3c9a-4e44-9d7c-2f3a1b6c8e90","status":"Paid"\}/);

  const altered = await fetch(`${url}/coinvoice`, { method: 'POST', headers, body: body.replace('Paid', 'Expired') });
  expect(altered.status).toBe(400);
  await receiver.waitFor(/REFUSED invoice\.paid \[evt-1\]/);
});

test('without a whsec_ secret it says where to find one and stops', async () => {
  const receiver = start({ COINVOICE_WEBHOOK_SECRET: '' });
  const code = await new Promise<number | null>((resolve) => receiver.child.on('close', resolve));
  expect(code).toBe(2);
  await receiver.waitFor(/set COINVOICE_WEBHOOK_SECRET to the project’s webhookSecret/);
});
