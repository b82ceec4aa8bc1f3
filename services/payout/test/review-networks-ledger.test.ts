/**
 * Adversarial review of issue 24 (networks): the ledger's reading of invoice.late_payment
 * (services/payout/src/events/ledger-consumer.ts). An event without pay_network is read as one from
 * before networks, on the currency's default network; but an event that names the network the money
 * arrived on (`network`, and a payment id `bsc:…`) is from after networks, and its money is on that
 * network: crediting it to the default network's balance puts bsc money in the ethereum balance,
 * payable from the Ethereum treasury.
 */
import { randomUUID } from 'node:crypto';
import { creditOfLatePayment } from '../src/events/ledger-consumer';

describe('review-networks: which balance a late payment credits', () => {
  it('a credited invoice.late_payment naming network bsc (payment id bsc:…) but no payNetwork is credited to the ETHEREUM USDT balance instead of being refused or credited on bsc', () => {
    const parsed = creditOfLatePayment({
      invoiceId: randomUUID(),
      projectId: randomUUID(),
      environment: 'live',
      currency: 'USDT',
      amount: '1',
      network: 'bsc',
      credited: true,
      paymentId: `bsc:0x${'ab'.repeat(32)}:3`,
    });
    const balance = parsed.ok ? (parsed.credit ? parsed.credit.network : 'nothing credited') : 'refused';
    expect(balance).toMatch(/^(bsc|refused)$/);
  });
});
