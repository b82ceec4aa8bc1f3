import { runMain, runService } from '@coinvoice/runtime';
import { payoutService } from './server';
import type * as SignerRole from './signer/role';

// `main.js sign [migrate]`: the signer role (docs/treasury.md); `main.js [migrate]`: the payout API (serve).
if (process.argv[2] === 'sign') {
  // Loaded here only: the role brings viem and the key code, which `serve` never needs.
  const { migrateSigner, startSigner } = require('./signer/role') as typeof SignerRole;
  if (process.argv[3] === 'migrate') {
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
