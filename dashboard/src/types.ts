/** The JSON the dashboard reads, as the gateway's schemas (gateway/src/schemas) define it. */
export interface Merchant {
  id: string;
  email: string;
  name: string;
  isAdmin: boolean;
  createdAt: string;
  emailVerified: boolean;
}

export interface Project {
  id: string;
  name: string;
  environment: 'live' | 'sandbox';
  webhookUrl: string | null;
  invoiceLifetimeMinutes: number;
  createdAt: string;
  paymentTolerancePercent: number;
}

export interface ApiKey {
  id: string;
  name: string;
  prefix: string;
  createdAt: string;
  revokedAt: string | null;
  lastUsedAt: string | null;
}

export interface Payment {
  transactionHash: string;
  amount: number;
  confirmations: number;
  status: string;
  detectedAt: string;
}

export interface Invoice {
  id: string;
  orderId: string;
  orderDescription: string;
  priceAmount: number;
  priceAmountInUsd: number;
  amountReceived: number;
  priceCurrency: string;
  payCurrency: string;
  status: string;
  createdAt: string;
  expiredAt: string;
  address: string;
  amountExpected: number;
  successUrl: string;
  cancelUrl: string;
  projectName: string;
  isDonation: boolean;
  /** Live invoices only (sandbox invoices are never watched on chain). */
  payments?: Payment[];
  confirmationsRequired?: number;
}

export interface Page<T> {
  items: T[];
  nextCursor: string | null;
}

export interface WebhookDelivery {
  id: string;
  eventId: string;
  eventType: string;
  url: string;
  status: 'pending' | 'succeeded' | 'failed';
  attemptCount: number;
  nextAttemptAt: string | null;
  createdAt: string;
  redeliveryOf: string | null;
  payload: string;
  lastResponseStatus: number | null;
}

export interface WebhookAttempt {
  attemptNumber: number;
  attemptedAt: string;
  requestHeaders: Record<string, string>;
  requestBody: string;
  responseStatus: number | null;
  responseBodyExcerpt: string;
  durationMs: number;
  error: string | null;
}

export interface EndpointHealth {
  url: string | null;
  lastSuccessAt: string | null;
  consecutiveFailures: number;
}

export interface DeliveryLog extends Page<WebhookDelivery> {
  endpoint: EndpointHealth;
}

export interface Payout {
  id: string;
  amount: number;
  currency: string;
  address: string;
  note: string;
  status: string;
  transactionHash: string | null;
  adminNote: string | null;
  createdAt: string;
  environment: 'live' | 'sandbox';
}

/** A payout in the operator queue, which spans projects. */
export interface OperatorPayout extends Payout {
  projectId: string;
}

export interface Balances {
  projectId: string;
  environment: 'live' | 'sandbox';
  balances: Array<{ currency: string; available: number; pending: number; total: number }>;
}
