-- The amount each input was said to hold when a payout was first signed, aligned with `inputs`
-- (docs/treasury.md#utxo-signer-policy). A segwit v0 signature commits to its own input's amount
-- only, and the amounts come from the caller's PSBT: two requests for one transaction, each honest
-- about another input and understating the rest, would each pass the fee cap and together make a
-- valid transaction burning the difference. Every later request for the payout must say the same
-- amounts. Null for payouts signed before this column (their later versions are not compared).
alter table utxo_payout_signatures add column input_amounts numeric[];
-- The binding holds per outpoint too, across payouts: an outpoint's amount is the one said at its
-- first signature, whichever payouts a later request lists (two payouts of one address and amount
-- could otherwise each be "first"). Looked up by outpoint under the coin's daily-row lock.
create index utxo_payout_signatures_inputs_idx on utxo_payout_signatures using gin (inputs);
