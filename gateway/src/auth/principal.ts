/** Who is calling, as established once per request by the authentication hooks. */
export type ProjectEnvironment = 'live' | 'sandbox';

export interface ApiKeyPrincipal {
  kind: 'api_key';
  keyId: string;
  projectId: string;
  projectName: string;
  environment: ProjectEnvironment;
  merchantId: string;
  invoiceLifetimeMinutes: number;
  /** Decimal string. */
  paymentTolerancePercent: string;
}

export interface MerchantPrincipal {
  kind: 'merchant';
  merchantId: string;
  email: string;
  admin: boolean;
  /** The session token itself: operator actions pass it on to be verified again by the service. */
  token: string;
}

export type Principal = ApiKeyPrincipal | MerchantPrincipal;

declare module 'fastify' {
  interface FastifyRequest {
    principal?: Principal;
  }
}
