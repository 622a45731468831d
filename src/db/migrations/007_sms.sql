-- SMS notifications: per-address rules that forward a summary of inbound mail to a phone, and
-- the durable queue of their sends (one per rule and message, written with the message).

CREATE TABLE sms_rules (
  id                   bigserial PRIMARY KEY,
  user_id              bigint NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  address_id           bigint NOT NULL REFERENCES inbound_addresses(id) ON DELETE CASCADE,
  -- normalized +255 and 9 digits
  phone_number         text NOT NULL,
  -- the account's own SMS provider key, AES-256-GCM under SECRETS_KEY (context "sms.provider_key")
  provider_key_sealed  text NOT NULL,
  provider_key_prefix  text NOT NULL,
  is_active            boolean NOT NULL DEFAULT true,
  revoked_at           timestamptz,
  created_at           timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX sms_rules_address_id ON sms_rules (address_id, id);
-- one active rule per address and phone: a second would send every SMS twice
CREATE UNIQUE INDEX sms_rules_active_phone ON sms_rules (address_id, phone_number) WHERE is_active;

CREATE TABLE sms_deliveries (
  id                   bigserial PRIMARY KEY,
  rule_id              bigint NOT NULL REFERENCES sms_rules(id) ON DELETE CASCADE,
  message_id           bigint NOT NULL REFERENCES inbound_messages(id) ON DELETE CASCADE,
  -- pending (also between retries) → sent | failed
  status               text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'sent', 'failed')),
  attempt              integer NOT NULL DEFAULT 0,
  -- the text sent (at most 160 characters), fixed when the message arrived
  body                 text NOT NULL,
  provider_message_id  text,
  last_error           text,
  next_attempt_at      timestamptz,
  locked_until         timestamptz,
  created_at           timestamptz NOT NULL DEFAULT now(),
  sent_at              timestamptz,
  -- SMS sends are deduplicated per inbound message
  UNIQUE (rule_id, message_id)
);
CREATE INDEX sms_deliveries_due ON sms_deliveries (next_attempt_at, id) WHERE status = 'pending';
CREATE INDEX sms_deliveries_message_id ON sms_deliveries (message_id);
