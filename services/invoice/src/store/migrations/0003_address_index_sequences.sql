-- Address indexes come from one Postgres sequence per key instead of a counter column: nextval
-- takes no row lock and waits for no commit, so concurrent invoice creations no longer queue one
-- fsync at a time behind the key's counter row. A sequence never hands out a value twice; a
-- creation that fails after taking one leaves a gap, which wallets scan past.
do $$
declare
  k record;
begin
  for k in select id, next_index from address_keys loop
    execute format(
      'create sequence if not exists address_index_%s as integer minvalue 0 maxvalue 2147483647 start with %s',
      k.id, k.next_index);
  end loop;
end $$;

alter table address_keys drop column next_index;
