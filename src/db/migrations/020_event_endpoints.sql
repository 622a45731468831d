-- Account event endpoints: HTTP endpoints of an account that subscribe to outbound events
-- (email.sent, email.failed, email.bounced, email.deferred, email.complained) and to
-- inbound.message_received for every address, and the durable queue of their deliveries
-- (outbox rows written in the transaction of the fact that caused them).

CREATE TABLE event_endpoints (
  id             bigserial PRIMARY KEY,
  user_id        bigint NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  url            text NOT NULL,
  -- AES-256-GCM under SECRETS_KEY (context "event_endpoint.secret")
  secret_sealed  text NOT NULL,
  -- the subscribed event names, a JSON array of strings
  events         jsonb NOT NULL,
  is_active      boolean NOT NULL DEFAULT true,
  created_at     timestamptz NOT NULL DEFAULT now(),
  updated_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX event_endpoints_user_id ON event_endpoints (user_id, id);

CREATE TABLE event_deliveries (
  id               bigserial PRIMARY KEY,
  endpoint_id      bigint NOT NULL REFERENCES event_endpoints(id) ON DELETE CASCADE,
  event            text NOT NULL,
  -- the JSON payload, fixed when the event happened: every retry sends the same bytes
  body             text NOT NULL,
  -- what the event is about (no foreign keys: the history outlives messages)
  email_id         bigint,
  message_id       bigint,
  -- pending → retrying → delivered | failed (as webhook_deliveries)
  status           text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'retrying', 'delivered', 'failed')),
  attempt          integer NOT NULL DEFAULT 0,
  status_code      integer,
  last_error       text,
  next_attempt_at  timestamptz,
  locked_until     timestamptz,
  delivered_at     timestamptz,
  created_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX event_deliveries_due ON event_deliveries (next_attempt_at, id) WHERE status IN ('pending', 'retrying');
CREATE INDEX event_deliveries_endpoint_id ON event_deliveries (endpoint_id, id DESC);
