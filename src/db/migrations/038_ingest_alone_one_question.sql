-- ingest_batch_alone (032) asks its follow-up question in one statement. It took six: the
-- addresses' ids, their accounts, and `followup_subscriptions` (029), a PL/pgSQL function of four
-- queries. Each statement a PL/pgSQL function runs has a fixed cost before it does any work
-- (executor start and end, a snapshot): ~0.1-0.2 ms each in PGlite's WebAssembly, and on a
-- PostgreSQL server the question was ~8 % of a batch call's CPU (bench/REPORT.md, MX ingest,
-- 2026-11-28 thirteenth and fourteenth sessions). The question is the same: any active webhook,
-- SMS rule or agent of the batch's addresses, or active event endpoint of their accounts, and
-- the batch is turned away unwritten. `followup_subscriptions` stays for the transaction's
-- subscribers (effects/ingest/events.ts), which need to know which of them apply.
CREATE OR REPLACE FUNCTION ingest_batch_alone(batch jsonb, blob bytea) RETURNS json LANGUAGE plpgsql AS $$
BEGIN
  IF EXISTS (
    WITH ids AS (
      SELECT DISTINCT (e ->> 'address_id')::int8 AS id FROM jsonb_array_elements(batch -> 'destinations') AS m, jsonb_array_elements(m) AS e
    )
    SELECT 1 FROM ids JOIN webhooks w ON w.address_id = ids.id WHERE w.is_active
    UNION ALL
    SELECT 1 FROM ids JOIN sms_rules s ON s.address_id = ids.id WHERE s.is_active
    UNION ALL
    SELECT 1 FROM ids JOIN agent_configs c ON c.address_id = ids.id WHERE c.enabled AND c.mode <> 'off'
    UNION ALL
    SELECT 1 FROM event_endpoints p WHERE p.is_active AND p.user_id IN (SELECT a.user_id FROM inbound_addresses a JOIN ids ON a.id = ids.id)
  ) THEN
    RETURN '{"followups": true}'::json;
  END IF;
  RETURN ingest_batch_bytes(batch, blob);
END
$$;

-- No SET clause (`plan_cache_mode`, as the other ingest functions have, 030): a function with one
-- saves and restores its settings on every call, and this one is called once per batch and calls
-- ingest_batch_bytes, which has its own. `bench/ingest-call.ts`, 8-message calls (bench/REPORT.md,
-- MX ingest, 2026-11-28 fourteenth session): on a PostgreSQL server 1.525-1.565 ms of backend CPU
-- per call with the clause against 1.33-1.355 without; on PGlite 2.87-3.42 ms against 2.77-3.32.
-- Its one statement names no parameter a plan could be specialised for (the ids come from the JSON).
