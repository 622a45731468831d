-- A batch commit as one statement, for batches whose addresses have no follow-up work
-- (effects/ingest/store.ts, `commitAlone`). ingest_batch_bytes (031) runs inside a transaction
-- because the subscribers' rows (webhook deliveries, SMS, agent jobs) must commit with the
-- messages, and which of them apply is only known once the call answered: BEGIN with the call,
-- then COMMIT, two round trips per batch. Most mail goes to addresses with no subscription; for
-- those, this call alone is the whole transaction (one round trip; 2 KiB mail over 20 reused
-- sessions, interleaved pairs: PGlite +3–14 % messages per second at 5–13 % less CPU per message,
-- PostgreSQL +5 % on average, inside the machine's spread; bench/REPORT.md).
--
-- It asks what the transaction's `followup_subscriptions` (029) would, for the same addresses
-- and their accounts, before anything is locked or written. When any subscription applies it
-- writes nothing and answers {"followups": true}: the caller then commits the batch the other way,
-- with its subscribers, so no follow-up work is ever left out. A subscription committed while
-- this call runs is missed exactly as the transaction's question would miss it.
CREATE FUNCTION ingest_batch_alone(batch jsonb, blob bytea) RETURNS json LANGUAGE plpgsql AS $$
DECLARE
  ids int8[] := ARRAY(
    SELECT DISTINCT (e ->> 'address_id')::int8 FROM jsonb_array_elements(batch -> 'destinations') AS m, jsonb_array_elements(m) AS e
  );
BEGIN
  IF EXISTS (SELECT 1 FROM followup_subscriptions(ids, ARRAY(SELECT DISTINCT a.user_id FROM inbound_addresses a WHERE a.id = ANY (ids)))) THEN
    RETURN '{"followups": true}'::json;
  END IF;
  RETURN ingest_batch_bytes(batch, blob);
END
$$;
