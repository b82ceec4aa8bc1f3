/**
 * Auto-sweep destination codes are secrets like payout codes (services/payout/README.md#auto-sweep):
 * code checks and issued codes are counted per project (RATE_LIMIT_AUTO_SWEEP_VERIFY_PER_PROJECT
 * 20/1h, RATE_LIMIT_AUTO_SWEEP_CODE_PER_PROJECT 10/1h). Found by the review of issue 23: each PUT
 * gave 5 fresh guesses and PUTs were unlimited, so a stolen dashboard session without the mailbox
 * could guess its way to its own destination for every future live balance (150 guesses in < 1 s).
 */
import { Code } from '@coinvoice/runtime';
import { addressFor, environmentOf, rejection, startPayoutHarness, wrongCode, type Harness } from './support/harness';

let h: Harness;

beforeAll(async () => {
  h = await startPayoutHarness();
}, 120_000);

afterAll(async () => {
  await h?.dispose();
});

/** The call's refusal, or undefined when it succeeded. */
async function refusalOrNothing(call: Promise<unknown>) {
  try {
    await call;
    return undefined;
  } catch {
    return rejection(call);
  }
}

test('auto-sweep code guesses are rate limited per project like payout verification', async () => {
  const project = h.auth.addProject('live');
  let guessesChecked = 0;
  let limited = false;
  for (let round = 0; round < 30 && !limited; round++) {
    const put = await refusalOrNothing(h.client.setAutoSweep({ projectId: project.id, environment: environmentOf(project), entries: [{ currency: 'USDT', address: addressFor('USDT', 'live'), threshold: '100' }] }));
    if (put?.connectCode === Code.ResourceExhausted) {
      limited = true;
      break;
    }
    const code = h.notifier.autoSweepCode(project.id)!;
    for (let attempt = 0; attempt < 5; attempt++) {
      const answer = await refusalOrNothing(h.client.verifyAutoSweep({ projectId: project.id, code: wrongCode(code) }));
      if (answer?.connectCode === Code.ResourceExhausted) {
        limited = true;
        break;
      }
      expect(answer).toMatchObject({ code: 'invalid_verification_code' });
      guessesChecked++;
    }
  }
  console.log(`auto-sweep: ${guessesChecked} wrong codes checked for one project within seconds; rate limited: ${limited}`);
  expect(guessesChecked).toBeLessThanOrEqual(20);
}, 120_000);

test('a destination refused as coinvoice\'s own counts against the code limit like any new destination: whether an address is the house\'s is not asked past it', async () => {
  const project = h.auth.addProject('live');
  const deposit = addressFor('ETH', 'live');
  h.invoice.houseAddresses.set(deposit.toLowerCase(), 'deposit');
  const put = (address: string) =>
    refusalOrNothing(h.client.setAutoSweep({ projectId: project.id, environment: environmentOf(project), entries: [{ currency: 'ETH', address, threshold: '1' }] }));
  const outcomes: string[] = [];
  for (let i = 0; i < 12; i++) outcomes.push((await put(deposit))?.code ?? 'ok');
  // RATE_LIMIT_AUTO_SWEEP_CODE_PER_PROJECT 10/1h: ten answered (refused as the house's), then 429.
  expect(outcomes).toEqual([...Array(10).fill('validation_failed'), 'rate_limited', 'rate_limited']);
  const asked = h.invoice.asked.filter((a) => a === deposit).length;
  expect(asked).toBe(10);
});
