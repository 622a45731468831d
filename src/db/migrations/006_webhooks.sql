-- Webhooks: per-address HTTP endpoints, and the durable queue of their deliveries (outbox rows
-- written in the transaction that stored the message; the webhook worker claims them).

CREATE TABLE webhooks (
  id             bigserial PRIMARY KEY,
  user_id        bigint NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  address_id     bigint NOT NULL REFERENCES inbound_addresses(id) ON DELETE CASCADE,
  url            text NOT NULL,
  -- AES-256-GCM under SECRETS_KEY (effects/shared/secretbox.ts, context "webhook.secret")
  secret_sealed  text NOT NULL,
  is_active      boolean NOT NULL DEFAULT true,
  created_at     timestamptz NOT NULL DEFAULT now(),
  updated_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX webhooks_address_id ON webhooks (address_id, id);

CREATE TABLE webhook_deliveries (
  id               bigserial PRIMARY KEY,
  webhook_id       bigint NOT NULL REFERENCES webhooks(id) ON DELETE CASCADE,
  message_id       bigint NOT NULL REFERENCES inbound_messages(id) ON DELETE CASCADE,
  event            text NOT NULL,
  -- pending → retrying → delivered | failed
  status           text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'retrying', 'delivered', 'failed')),
  -- attempts started so far; an attempt counts from the moment it is taken, so a crash mid-request
  -- never lets the same attempt be made twice
  attempt          integer NOT NULL DEFAULT 0,
  status_code      integer,
  last_error       text,
  -- when the next attempt is due (the worker's queue order); NULL once delivered or failed
  next_attempt_at  timestamptz,
  -- lease of the instance handling the row (claimDue)
  locked_until     timestamptz,
  delivered_at     timestamptz,
  created_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at, id) WHERE status IN ('pending', 'retrying');
CREATE INDEX webhook_deliveries_webhook_id ON webhook_deliveries (webhook_id, id DESC);
CREATE INDEX webhook_deliveries_message_id ON webhook_deliveries (message_id);
