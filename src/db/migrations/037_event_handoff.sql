-- Account event endpoint deliveries of `inbound.message_received` queued already taken, as 036
-- does for inbox webhooks (effects/webhooks/event-deliveries.ts `queueInbound`,
-- effects/deliveries/handoff.ts): leased to the instance whose ingest commit queued them, first
-- attempt counted, returned with the endpoint's columns for its worker to post at once. The rows
-- are otherwise those of queue_event_deliveries (028).
CREATE FUNCTION queue_event_deliveries_taken(p_event text, p_at_text text, p_at timestamptz, p_lease timestamptz, p_messages json)
RETURNS TABLE (
  id int8, endpoint_id int8, event text, body text, email_id int8, message_id int8, status text, attempt int4,
  status_code int4, last_error text, next_attempt_at timestamptz, locked_until timestamptz, delivered_at timestamptz,
  created_at timestamptz, url text, secret_sealed text, is_active boolean
) LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
  RETURN QUERY
  WITH queued AS (
    INSERT INTO event_deliveries (endpoint_id, event, body, email_id, message_id, status, attempt, next_attempt_at, locked_until, created_at)
    SELECT e.id, p_event,
           json_build_object('event', p_event, 'webhook_id', e.id, 'address_id', m.address_id, 'message_id', m.id, 'timestamp', p_at_text)::text,
           NULL, m.id, 'pending', 1, p_at, p_lease, p_at
      FROM json_to_recordset(p_messages) AS m (id int8, user_id int8, address_id int8)
      JOIN event_endpoints e ON e.user_id = m.user_id AND e.is_active AND e.events ? p_event
     ORDER BY m.id, e.id
    RETURNING *)
  SELECT q.id, q.endpoint_id, q.event, q.body, q.email_id, q.message_id, q.status, q.attempt, q.status_code, q.last_error,
         q.next_attempt_at, q.locked_until, q.delivered_at, q.created_at, e.url, e.secret_sealed, e.is_active
    FROM queued q JOIN event_endpoints e ON e.id = q.endpoint_id
   ORDER BY q.id;
END
$$;
ALTER FUNCTION queue_event_deliveries_taken(text, text, timestamptz, timestamptz, json) SET plan_cache_mode = force_generic_plan;
