/**
 * Rule (docs/treasury.md#processor, services/payout/README.md "Processor"): an ETH payout's gas is
 * estimated like a token payout's (eth_estimateGas from the treasury, +10 %, at most
 * SIGNER_MAX_GAS_LIMIT; exactly 21,000 to an account without code). A destination that is a
 * contract whose receive() does work — a Safe multisig, the usual home of a merchant's cold funds —
 * is paid, not rejected out of gas. The stand-in's receive() writes one storage slot (~22,100 gas),
 * much like a Safe proxy's.
 */
import { getAddress, parseEther, type Address, type Hex } from 'viem';
import { activeProcessor, startTreasuryWorld, type TreasuryWorld } from './support/treasury';
import { waitFor } from './support/harness';

let world: TreasuryWorld;

/** Init code returning the runtime PUSH1 1 PUSH1 0 SSTORE STOP: any call (a plain ETH transfer too) writes slot 0. */
const STORE_ON_RECEIVE: Hex = '0x656001600055006000526006601af3';

beforeAll(async () => {
  world = await startTreasuryWorld();
  await activeProcessor(await world.startProcessor());
}, 120_000);

afterAll(async () => {
  await world?.dispose();
});

test('an ETH payout to a contract wallet whose receive() writes storage arrives and completes', async () => {
  const hash = await world.anvil.wallet.deployContract({ abi: [], bytecode: STORE_ON_RECEIVE });
  const receipt = await world.anvil.publicClient.waitForTransactionReceipt({ hash, pollingInterval: 50 });
  const wallet = getAddress(receipt.contractAddress as Address);
  expect(await world.anvil.publicClient.getCode({ address: wallet })).toBe('0x600160005500');

  const payout = await world.payout('ETH', '0.25', { address: wallet });
  const settled = await waitFor('the payout settled', async () => {
    const row = await world.payoutRow(payout.id);
    return row.status === 'Completed' || row.status === 'Rejected' ? row : undefined;
  }, 30_000);
  expect({ status: settled.status, note: settled.admin_note, received: await world.anvil.publicClient.getBalance({ address: wallet }) }).toEqual({
    status: 'Completed',
    note: null,
    received: parseEther('0.25'),
  });
}, 90_000);
