/**
 * Adversarial review of issue 24 (networks): `CHAIN_<NETWORK>_CHAIN_ID` in production.
 *
 * Live invoices are always on the main chain: their EIP-681 URI names the registry's main chain id
 * (`@8453` for Base, evm/family.ts paymentUri via evmChainId), whatever CHAIN_BASE_CHAIN_ID says. The
 * watcher's start-up check compares the node with CHAIN_BASE_CHAIN_ID only, so in production a
 * watcher configured with Base Sepolia's id (84532) and a Sepolia node starts, and its free test
 * USDC pays live invoices. A chain id other than the registry's main chain id has no use in
 * production (anvil's 31337 is development's).
 */
import { ConfigError, loadServiceConfig } from '@coinvoice/runtime';
import { watcherService } from '../src/watcher/role';
import { throwawayXpubs } from '../../../test/support/xpubs';
import { testEventKeys } from '../../../test/support/event-keys';
import { TestCertificateAuthority } from '../../../test/support/certificates';

let ca: TestCertificateAuthority;
let production: Record<string, string>;

beforeAll(() => {
  ca = new TestCertificateAuthority();
  const cert = ca.issue('invoice');
  production = {
    APP_ENV: 'production',
    DATABASE_URL: 'postgres://nobody@127.0.0.1:1/none',
    NATS_URL: 'nats://127.0.0.1:1',
    TLS_CA_FILE: ca.caFile,
    TLS_CERT_FILE: cert.certFile,
    TLS_KEY_FILE: cert.keyFile,
    EVENT_SIGNING_KEY_FILE: testEventKeys().file('invoice'),
    ...throwawayXpubs(),
    CHAIN_BASE_RPC_URL: 'https://base-sepolia.example/rpc',
  };
});

afterAll(() => {
  ca?.remove();
});

describe('review-networks: the chain id in production', () => {
  it("APP_ENV=production takes CHAIN_BASE_CHAIN_ID=84532 (Base Sepolia) for `watch base`, so a test-chain node's coins would pay live invoices whose checkout names chain 8453", () => {
    // The same configuration with the main chain's id loads: only the chain id is in question.
    expect(() => loadServiceConfig(watcherService('base'), { ...production, CHAIN_BASE_CHAIN_ID: '8453' })).not.toThrow();
    expect(() => loadServiceConfig(watcherService('base'), { ...production, CHAIN_BASE_CHAIN_ID: '84532' })).toThrow(ConfigError);
  });
});
