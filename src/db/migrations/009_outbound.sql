-- Outbound: templates, the content of each send (shared by every message of a batch), the
-- messages themselves with one row per recipient (the outbox: written with the charge, before
-- dispatch), the per-account suppression list, Idempotency-Key records, and the captures of the
-- embedded local transport.

CREATE TABLE templates (
  id          bigserial PRIMARY KEY,
  user_id     bigint NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  name        text NOT NULL,
  subject     text,
  html_body   text,
  text_body   text,
  created_at  timestamptz NOT NULL DEFAULT now(),
  updated_at  timestamptz NOT NULL DEFAULT now()
);
-- a name picks one template of the account (409 CONFLICT on a duplicate)
CREATE UNIQUE INDEX templates_user_name ON templates (user_id, name);

-- What one send call asked for, after template rendering: a single send has one message on
-- it, a batch one message per recipient. Kept once so a batch of 1000 stores its body once.
CREATE TABLE outbound_contents (
  id           bigserial PRIMARY KEY,
  user_id      bigint NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  -- `single` (POST /emails, OutboundSender) or `batch` (POST /emails/batch)
  kind         text NOT NULL CHECK (kind IN ('single', 'batch')),
  subject      text NOT NULL,
  html_body    text NOT NULL DEFAULT '',
  text_body    text NOT NULL DEFAULT '',
  -- extra headers of OutboundSender callers (In-Reply-To, References, Auto-Submitted)
  headers      jsonb NOT NULL DEFAULT '{}'::jsonb,
  template_id  bigint REFERENCES templates(id) ON DELETE SET NULL,
  -- batch only: recipients left out because they are suppressed (the answer lists them)
  suppressed   jsonb NOT NULL DEFAULT '[]'::jsonb,
  created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX outbound_contents_user_id ON outbound_contents (user_id);

-- Attachment bytes, needed until every message of the content left (crash recovery re-sends
-- them); deleted after that, since no API returns them.
CREATE TABLE outbound_attachments (
  content_id    bigint NOT NULL REFERENCES outbound_contents(id) ON DELETE CASCADE,
  position      integer NOT NULL,
  filename      text NOT NULL,
  content_type  text NOT NULL,
  size          integer NOT NULL,
  data          bytea NOT NULL,
  PRIMARY KEY (content_id, position)
);

CREATE TABLE outbound_messages (
  id                   bigserial PRIMARY KEY,
  user_id              bigint NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  content_id           bigint NOT NULL REFERENCES outbound_contents(id) ON DELETE CASCADE,
  from_address         text NOT NULL,
  -- the verified sending domain it went from, NULL for the platform domain (no foreign key:
  -- deleting a domain keeps the history of what was sent from it)
  domain_id            bigint,
  -- bare addresses as requested; display names are on outbound_recipients
  to_addresses         jsonb NOT NULL DEFAULT '[]'::jsonb,
  cc_addresses         jsonb NOT NULL DEFAULT '[]'::jsonb,
  bcc_addresses        jsonb NOT NULL DEFAULT '[]'::jsonb,
  -- queued: charged and written, dispatch under way (or interrupted by a crash: the recovery
  -- worker takes it once locked_until passed); sent: the provider accepted at least one
  -- recipient; failed: none (provider failure or every recipient refused), fully refunded
  status               text NOT NULL DEFAULT 'queued' CHECK (status IN ('queued', 'sent', 'failed')),
  error_code           text,
  provider_message_id  text,
  -- the Message-ID header (without brackets), fixed at creation so a re-dispatch reuses it
  message_id_header    text NOT NULL,
  -- what the account paid net: 5 per charged recipient, less refunds
  amount_tzs           bigint NOT NULL CHECK (amount_tzs >= 0),
  -- dispatches started (the request's own, then the recovery worker's)
  attempts             integer NOT NULL DEFAULT 1,
  -- lease of whoever is dispatching it; the recovery worker takes queued rows past it
  locked_until         timestamptz,
  created_at           timestamptz NOT NULL DEFAULT now(),
  updated_at           timestamptz NOT NULL DEFAULT now()
);
-- newest first per account (see inbound_messages_address_newest for why -id)
CREATE INDEX outbound_messages_user_newest ON outbound_messages (user_id, (-id));
CREATE INDEX outbound_messages_content_id ON outbound_messages (content_id);
CREATE INDEX outbound_messages_queued ON outbound_messages (locked_until, id) WHERE status = 'queued';

CREATE TABLE outbound_recipients (
  id                   bigserial PRIMARY KEY,
  message_id           bigint NOT NULL REFERENCES outbound_messages(id) ON DELETE CASCADE,
  -- as requested (case kept); compared lowercase
  email                text NOT NULL,
  -- the display name of `Name <addr@domain>`, for the To/Cc headers
  name                 text,
  kind                 text NOT NULL CHECK (kind IN ('to', 'cc', 'bcc')),
  status               text NOT NULL DEFAULT 'queued' CHECK (status IN ('queued', 'sent', 'failed')),
  -- suppressed (dropped before charging), rejected (the provider refused it), provider_error
  error                text,
  -- the SMTP reply code for this recipient (250, 550 …); NULL when none was given
  provider_code        integer,
  provider_message_id  text,
  -- charged for this recipient (0 for suppressed ones); refunds come off the message's amount
  charged              boolean NOT NULL,
  created_at           timestamptz NOT NULL DEFAULT now(),
  updated_at           timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX outbound_recipients_message_id ON outbound_recipients (message_id, id);

-- Per account: addresses that answered a permanent (5xx) failure; sends drop them before charging.
CREATE TABLE suppressions (
  user_id        bigint NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  -- lowercase
  email          text NOT NULL,
  reason         text NOT NULL,
  provider_code  integer,
  -- the message whose dispatch added it (no foreign key: the entry outlives the message)
  message_id     bigint,
  created_at     timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (user_id, email)
);

-- Idempotency-Key: the first request with a key within 24 h is the one that counts; a replay
-- with the same body is answered from the messages of its content, another body is refused.
CREATE TABLE outbound_idempotency_keys (
  user_id       bigint NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  key           text NOT NULL,
  -- SHA-256 of the endpoint and the canonical JSON body
  request_hash  text NOT NULL,
  content_id    bigint NOT NULL REFERENCES outbound_contents(id) ON DELETE CASCADE,
  created_at    timestamptz NOT NULL,
  PRIMARY KEY (user_id, key)
);
CREATE INDEX outbound_idempotency_keys_created_at ON outbound_idempotency_keys (created_at);

-- The embedded default transport (SMTP_RELAY_URL unset): what would have been sent, as sent.
CREATE TABLE outbound_captures (
  id             bigserial PRIMARY KEY,
  user_id        bigint NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  message_id     bigint,
  envelope_from  text NOT NULL,
  envelope_to    jsonb NOT NULL,
  -- the composed MIME, DKIM-signed when the message went from a verified own domain
  raw            bytea NOT NULL,
  size_bytes     integer NOT NULL,
  created_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX outbound_captures_message_id ON outbound_captures (message_id);
