import { ConfigError, refusePublishedSecrets, runMain, runService } from '@coinvoice/runtime';
import { startProcessor } from './processor/role';
import { payoutService } from './server';
import type * as SignerRole from './signer/role';

// `main.js process <network>`: the payout processor role (docs/treasury.md#processor);
// `main.js sign [migrate|xpub]`: the signer role (docs/treasury.md); `main.js`: the payout API (serve). (`migrate` is main.ts's.)
if (process.argv[2] === 'process') {
  const network = process.argv[3] ?? '';
  runMain({
    name: `payout process ${network}`,
    // The definition's checkConfig runs before any connection: a missing node stops it with one line.
    start: () => startProcessor(network),
  });
} else if (process.argv[2] === 'sign') {
  // Loaded here only: the role brings viem and the key code, which `serve` never needs.
  const { migrateSigner, signerAccountXpub, startSigner } = require('./signer/role') as typeof SignerRole;
  if (process.argv[3] === 'xpub') {
    // The seed account's xpub, for INVOICE_XPUB_ETH/_USDT/_USDC, or (`sign xpub bitcoin|litecoin|tron`) _BTC/_LTC/_TRX (npm start asks it; so may an operator).
    try {
      // Production gives out no xpub of a published mnemonic (one line, as a service would say it).
      refusePublishedSecrets(process.env);
      process.stdout.write(`${signerAccountXpub(process.env, process.argv[4])}\n`);
    } catch (err) {
      process.stderr.write(`${err instanceof ConfigError ? '' : 'payout sign xpub: '}${err instanceof Error ? err.message : String(err)}\n`);
      process.exitCode = 1;
    }
  } else if (process.argv[3] === 'migrate') {
    migrateSigner().then(
      () => process.exit(0),
      (err: unknown) => {
        process.stderr.write(`payout sign: migration failed: ${err instanceof Error ? err.message : String(err)}\n`);
        process.exit(1);
      },
    );
  } else {
    runMain({ name: 'payout sign', start: startSigner });
  }
} else {
  runService(payoutService);
}
