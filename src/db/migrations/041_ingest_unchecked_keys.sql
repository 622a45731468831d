-- The rows ingest writes no longer have their parents checked by foreign keys. A foreign key
-- check is a query per row and key (with a lock on the parent row), and a stored copy paid four
-- of them beyond the ledger's: its address, its owner, its MIME row, and the MIME row's owner.
-- `bench/ingest-call.ts` on PGlite, 30 messages a call: 5.76–6.45 ms with them, 4.86–5.29
-- without (bench/REPORT.md, MX ingest, thirty-first session).
-- What they checked holds without them:
-- - ingest_batch_bytes writes copies only for addresses it holds locked (FOR NO KEY UPDATE, which
--   a DELETE waits for), with the owner read from that locked row, and MIME rows it writes in the
--   same statement; a MIME row goes only once no copy refers to it (message_refs,
--   effects/messages/purge.ts). Nothing else inserts these rows.
-- - Deleting an address purges its messages first (effects/addresses/service.ts).
-- The cascades stay, as triggers on the parents: a deleted address takes its messages, a deleted
-- account its MIME rows (and its addresses, and through them their messages, as before).
-- The ledger keeps its foreign key: it is written from many places, and it is the money.
ALTER TABLE inbound_messages
  DROP CONSTRAINT inbound_messages_address_id_fkey,
  DROP CONSTRAINT inbound_messages_user_id_fkey,
  DROP CONSTRAINT inbound_messages_mime_id_fkey;
ALTER TABLE inbound_mime DROP CONSTRAINT inbound_mime_user_id_fkey;

-- A cascade as a trigger: deletes the rows of TG_ARGV[0] whose column TG_ARGV[1] names the
-- deleted row (as ON DELETE CASCADE did, without a check on every insert).
CREATE FUNCTION delete_children() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE format('DELETE FROM %I WHERE %I = $1', TG_ARGV[0], TG_ARGV[1]) USING OLD.id;
  RETURN NULL;
END
$$;
CREATE TRIGGER inbound_addresses_delete_messages AFTER DELETE ON inbound_addresses
  FOR EACH ROW EXECUTE FUNCTION delete_children('inbound_messages', 'address_id');
CREATE TRIGGER users_delete_inbound_mime AFTER DELETE ON users
  FOR EACH ROW EXECUTE FUNCTION delete_children('inbound_mime', 'user_id');
