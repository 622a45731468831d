-- Inbox webhook deliveries queued already taken by the instance whose ingest commit queued them
-- (effects/webhooks/delivery.ts `enqueueTaken`, effects/deliveries/handoff.ts): leased to that
-- instance until p_lease, with their first attempt counted (as the worker's take would count
-- it, before any request), and returned with what the request needs. Its worker then posts them
-- straight after the commit instead of claiming and taking each (two statements and two round
-- trips per delivery, each behind the ingest commits on a busy database). Everything else about
-- the rows is as queue_webhook_deliveries (028) writes them: an instance that dies leaves them
-- to whoever claims them after the lease, which takes the next attempt.
CREATE FUNCTION queue_webhook_deliveries_taken(p_event text, p_at timestamptz, p_lease timestamptz, p_messages json)
RETURNS TABLE (
  id int8, webhook_id int8, message_id int8, event text, status text, attempt int4, status_code int4,
  last_error text, next_attempt_at timestamptz, locked_until timestamptz, delivered_at timestamptz,
  created_at timestamptz, url text, secret_sealed text, address_id int8, is_active boolean
) LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
  RETURN QUERY
  WITH queued AS (
    INSERT INTO webhook_deliveries (webhook_id, message_id, event, status, attempt, next_attempt_at, locked_until, created_at)
    SELECT w.id, m.id, p_event, 'pending', 1, p_at, p_lease, p_at
      FROM json_to_recordset(p_messages) AS m (id int8, address_id int8) JOIN webhooks w ON w.address_id = m.address_id AND w.is_active
     ORDER BY m.id, w.id
    RETURNING *)
  SELECT q.id, q.webhook_id, q.message_id, q.event, q.status, q.attempt, q.status_code, q.last_error, q.next_attempt_at,
         q.locked_until, q.delivered_at, q.created_at, w.url, w.secret_sealed, w.address_id, w.is_active
    FROM queued q JOIN webhooks w ON w.id = q.webhook_id
   ORDER BY q.id;
END
$$;
ALTER FUNCTION queue_webhook_deliveries_taken(text, timestamptz, timestamptz, json) SET plan_cache_mode = force_generic_plan;
