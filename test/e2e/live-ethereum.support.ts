/**
 * What the live-Ethereum end-to-end files share: a project's live invoices read and created through
 * the gateway, waits on their state, and the project's live balance, exactly (its decimal string).
 */
import { Decimal } from '@coinvoice/domain/money';
import { apiKeyHeader, type GatewayClient, type ProjectFixture } from '../support/http';
import { eventually } from './webhooks.support';

export interface LivePayment {
  transactionHash: string;
  amount: number;
  amountDecimal: string;
  asset: string;
  confirmations: number;
  status: string;
  detectedAt: string;
}

export interface LiveInvoice {
  id: string;
  status: string;
  address: string;
  amountExpected: number;
  amountExpectedDecimal: string;
  amountReceived: number;
  amountReceivedDecimal: string;
  confirmationsRequired?: number;
  payments?: LivePayment[];
}

/** One project's invoices and balance through the public API (its x-api-key). */
export class LiveShop {
  constructor(
    private readonly api: GatewayClient,
    readonly project: ProjectFixture,
  ) {}

  async createInvoice(payCurrency: string, priceAmount = '20.00'): Promise<LiveInvoice> {
    const res = await this.api.post(
      '/api/invoice',
      { priceAmount, priceCurrency: 'USD', payCurrency, orderId: `order-${Math.random().toString(36).slice(2)}`, successUrl: 'https://shop.example/ok', cancelUrl: 'https://shop.example/no' },
      { headers: apiKeyHeader(this.project.key) },
    );
    if (res.status !== 201) throw new Error(`create failed: ${res.status} ${res.text}`);
    return res.body as LiveInvoice;
  }

  async getInvoice(id: string): Promise<LiveInvoice> {
    const res = await this.api.get(`/api/invoice/${id}`, { headers: apiKeyHeader(this.project.key) });
    if (res.status !== 200) throw new Error(`get failed: ${res.status} ${res.text}`);
    return res.body as LiveInvoice;
  }

  async invoiceReaches(id: string, check: (invoice: LiveInvoice) => boolean, what: string, timeoutMs = 20_000): Promise<LiveInvoice> {
    return eventually(async () => {
      const invoice = await this.getInvoice(id);
      return check(invoice) ? invoice : undefined;
    }, timeoutMs, `invoice ${id} ${what}`);
  }

  /** The project's available balance in `currency`, exactly. */
  async balance(currency: string): Promise<Decimal> {
    const res = await this.api.get('/api/payout/balance', { headers: apiKeyHeader(this.project.key) });
    if (res.status !== 200) throw new Error(`balance failed: ${res.status} ${res.text}`);
    const balances = res.body.balances as Array<{ currency: string; availableDecimal: string }>;
    return new Decimal(balances.find((b) => b.currency === currency)?.availableDecimal ?? '0');
  }

  async balanceReaches(currency: string, expected: Decimal): Promise<void> {
    await eventually(async () => ((await this.balance(currency)).eq(expected) ? true : undefined), 20_000, `${currency} balance ${expected.toFixed()}`);
  }
}
