-- The functions every ingest commit and RCPT lookup calls keep one generic plan per statement.
-- With the default plan_cache_mode, PL/pgSQL re-plans a statement whose parameters are arrays
-- (the batch's ids, `generate_series(1, cardinality(...))`) on every call: ingest_batch planned
-- its dozen statements each time, ~0.6–1.2 ms per call on PostgreSQL 15 and ~3 ms on PGlite,
-- whatever the batch held (bench/REPORT.md, MX ingest). The generic plans were checked with
-- auto_explain on 100,000 addresses and wallets: every table is reached by its primary key
-- (nested loops over the batch's rows), as in the custom plans.
ALTER FUNCTION ingest_batch(jsonb) SET plan_cache_mode = force_generic_plan;
ALTER FUNCTION ingest_lookup(text, json) SET plan_cache_mode = force_generic_plan;
ALTER FUNCTION followup_subscriptions(int8[], int8[]) SET plan_cache_mode = force_generic_plan;
ALTER FUNCTION queue_webhook_deliveries(text, timestamptz, json) SET plan_cache_mode = force_generic_plan;
ALTER FUNCTION queue_event_deliveries(text, text, timestamptz, json) SET plan_cache_mode = force_generic_plan;
ALTER FUNCTION queue_agent_jobs(timestamptz, json) SET plan_cache_mode = force_generic_plan;
ALTER FUNCTION sms_ruled_addresses(int8[]) SET plan_cache_mode = force_generic_plan;
