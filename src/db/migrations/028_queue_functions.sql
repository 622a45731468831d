-- The follow-up work of an ingest commit (effects/ingest/events.ts): each subscriber's INSERT …
-- SELECT, unchanged, as a PL/pgSQL function so its plan is kept for the session. PGlite keeps no
-- plan for a plain statement, and these run in every batch commit whether or not anything is to
-- be queued: timed in the PGlite adapter, 5.7 ms per batch of ~17 messages, mostly planning
-- (bench/REPORT.md, MX ingest). On a PostgreSQL server the driver had them prepared already; there
-- the call is the same one round trip.
--
-- p_messages: [{id, address_id, user_id}] (the stored copies of the commit). Each returns how
-- many rows it queued.

CREATE FUNCTION queue_webhook_deliveries(p_event text, p_at timestamptz, p_messages json) RETURNS int4 LANGUAGE plpgsql AS $$
DECLARE
  n int4;
BEGIN
  INSERT INTO webhook_deliveries (webhook_id, message_id, event, status, attempt, next_attempt_at, created_at)
  SELECT w.id, m.id, p_event, 'pending', 0, p_at, p_at
    FROM json_to_recordset(p_messages) AS m (id int8, address_id int8) JOIN webhooks w ON w.address_id = m.address_id AND w.is_active
   ORDER BY m.id, w.id;
  GET DIAGNOSTICS n = ROW_COUNT;
  RETURN n;
END
$$;

-- The body names the endpoint (`webhook_id`), known only in the join; `p_at_text` is the event's
-- `timestamp` exactly as the application formats it.
CREATE FUNCTION queue_event_deliveries(p_event text, p_at_text text, p_at timestamptz, p_messages json) RETURNS int4 LANGUAGE plpgsql AS $$
DECLARE
  n int4;
BEGIN
  INSERT INTO event_deliveries (endpoint_id, event, body, email_id, message_id, status, attempt, next_attempt_at, created_at)
  SELECT e.id, p_event,
         json_build_object('event', p_event, 'webhook_id', e.id, 'address_id', m.address_id, 'message_id', m.id, 'timestamp', p_at_text)::text,
         NULL, m.id, 'pending', 0, p_at, p_at
    FROM json_to_recordset(p_messages) AS m (id int8, user_id int8, address_id int8)
    JOIN event_endpoints e ON e.user_id = m.user_id AND e.is_active AND e.events ? p_event
   ORDER BY m.id, e.id;
  GET DIAGNOSTICS n = ROW_COUNT;
  RETURN n;
END
$$;

CREATE FUNCTION queue_agent_jobs(p_at timestamptz, p_messages json) RETURNS int4 LANGUAGE plpgsql AS $$
DECLARE
  n int4;
BEGIN
  INSERT INTO agent_jobs (user_id, address_id, message_id, status, attempt, next_attempt_at, created_at)
  SELECT c.user_id, c.address_id, m.id, 'pending', 0, p_at, p_at
    FROM json_to_recordset(p_messages) AS m (id int8, address_id int8)
    JOIN agent_configs c ON c.address_id = m.address_id AND c.enabled AND c.mode <> 'off'
   ORDER BY m.id
  ON CONFLICT (message_id) DO NOTHING;
  GET DIAGNOSTICS n = ROW_COUNT;
  RETURN n;
END
$$;

-- Which of `address_ids` have an active SMS rule (the summary is only worth making for those).
CREATE FUNCTION sms_ruled_addresses(p_address_ids int8[]) RETURNS SETOF int8 LANGUAGE plpgsql STABLE AS $$
BEGIN
  RETURN QUERY SELECT DISTINCT r.address_id FROM sms_rules r WHERE r.is_active AND r.address_id = ANY (p_address_ids);
END
$$;
