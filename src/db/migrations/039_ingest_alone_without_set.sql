-- ingest_batch_alone without the SET clause 038 gave it (`plan_cache_mode`): a function with a SET
-- clause saves and restores its settings on every call, and this one is called once per batch
-- and calls ingest_batch_bytes, which has its own. `bench/ingest-call.ts`, 8-message calls,
-- three or four alternations (bench/REPORT.md, MX ingest, 2026-11-28 fourteenth session): on a
-- PostgreSQL server 1.525-1.565 ms of backend CPU with the clause against 1.33-1.355 without (and
-- 1.32-1.565 before 038); on PGlite 3.30-3.42 ms per call with it, 2.77-3.32 without, 2.97-3.24
-- before 038. Its one statement keeps its plan either way: it names no parameter the planner
-- could use (the ids come from the batch's JSON).
ALTER FUNCTION ingest_batch_alone(jsonb, bytea) RESET plan_cache_mode;
