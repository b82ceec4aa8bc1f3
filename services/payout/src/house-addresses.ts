/**
 * Destinations coinvoice holds itself (docs/treasury.md#house-addresses): an invoice's deposit
 * address, a treasury address, a UTXO treasury's change. Coins a payout sends there are no payment
 * to anyone — the watcher takes the treasury's transfers for sweep gas — and would be stranded, so
 * payouts and auto-sweep destinations are refused there.
 */
import type { Client } from '@connectrpc/connect';
import { addressForms } from '@coinvoice/chains/address-forms';
import { errors, type Queryable } from '@coinvoice/runtime';
import type { InvoiceService } from '@coinvoice/runtime/gen/coinvoice/invoice/v1/invoice_pb';

export type HouseAddressKind = 'deposit' | 'treasury';

/** The kind of house address `address` is, or undefined when it is nobody's at coinvoice. */
export type HouseAddressLookup = (address: string) => Promise<HouseAddressKind | undefined>;

/**
 * The treasury addresses this service knows (each network's, as its processor recorded the
 * signer's answer, and the UTXO treasuries' change: every batch's change address from the moment the
 * batch is built, not only once its change is a coin), then the invoice service's issued addresses and
 * the EVM treasuries of its keys. Compared in every form of the key behind the address
 * (`addressForms`: EVM hex and Tron base58 of the same 20 bytes) and without letter case: bech32
 * and EVM addresses are case-insensitive, and a base58 address differing only in case is another
 * key nobody could hold.
 */
export function houseAddressLookup(sql: Queryable, invoices: Pick<Client<typeof InvoiceService>, 'findHouseAddress'>): HouseAddressLookup {
  return async (address) => {
    const forms = addressForms(address).map((form) => form.toLowerCase());
    const own = await sql`
      select 1 from treasury_networks where lower(address) = any(${forms}::text[])
      union all
      select 1 from utxo_coins where branch = 1 and lower(address) = any(${forms}::text[])
      union all
      select 1 from utxo_batches where lower(change_address) = any(${forms}::text[])
      limit 1`;
    if (own.length > 0) return 'treasury';
    const { kind } = await invoices.findHouseAddress({ address });
    return kind === 'deposit' || kind === 'treasury' ? kind : undefined;
  };
}

/** Refuses `address` (the request's field `field`) when coinvoice holds it. */
export async function refuseHouseDestination(lookup: HouseAddressLookup, address: string, field: string): Promise<void> {
  const kind = await lookup(address);
  if (kind === undefined) return;
  const what = kind === 'deposit' ? 'a coinvoice invoice’s deposit address' : 'a coinvoice treasury address';
  throw errors.validation([
    {
      field,
      message: `is ${what}: coins paid out to it would be credited to no one (to pay a coinvoice invoice, pay it from a wallet of your own)`,
    },
  ]);
}
