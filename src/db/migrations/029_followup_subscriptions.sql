-- Which subscription tables hold something for a commit's messages (effects/ingest/events.ts):
-- an ingest commit calls only the subscribers named here. Most accounts have no webhook, event
-- endpoint, SMS rule or agent, yet each subscriber's INSERT … SELECT ran in every commit; on
-- PGlite that was 3.8 ms per batch of ~10 messages, a quarter of its CPU per message
-- (bench/REPORT.md, MX ingest). These are four index probes in one call.
--
-- It may name a table whose rows then match nothing (an endpoint not subscribed to the event):
-- the subscriber finds nothing to queue, as before. It must never leave out a table that has a
-- row the subscriber's own statement would join: its conditions are those statements' (028,
-- effects/sms/delivery.ts), or weaker.
CREATE FUNCTION followup_subscriptions(p_address_ids int8[], p_user_ids int8[]) RETURNS SETOF text LANGUAGE plpgsql STABLE AS $$
BEGIN
  IF EXISTS (SELECT 1 FROM webhooks WHERE address_id = ANY (p_address_ids) AND is_active) THEN
    RETURN NEXT 'webhooks';
  END IF;
  IF EXISTS (SELECT 1 FROM event_endpoints WHERE user_id = ANY (p_user_ids) AND is_active) THEN
    RETURN NEXT 'event_endpoints';
  END IF;
  IF EXISTS (SELECT 1 FROM sms_rules WHERE address_id = ANY (p_address_ids) AND is_active) THEN
    RETURN NEXT 'sms_rules';
  END IF;
  IF EXISTS (SELECT 1 FROM agent_configs WHERE address_id = ANY (p_address_ids) AND enabled AND mode <> 'off') THEN
    RETURN NEXT 'agent_configs';
  END IF;
END
$$;
