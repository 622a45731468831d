-- AI auto-reply: one AgentConfig per inbound address, the durable queue of agent jobs (one per
-- inbound message of an address whose agent is on, written with the message), and the drafts
-- kept for review in `draft` mode. Everything cascades from the address and the message, so the
-- retention purge and address deletion take the agent's rows along.

CREATE TABLE agent_configs (
  address_id            bigint PRIMARY KEY REFERENCES inbound_addresses(id) ON DELETE CASCADE,
  user_id               bigint NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  mode                  text NOT NULL DEFAULT 'off' CHECK (mode IN ('off', 'draft', 'auto')),
  -- the system prompt; NULL means the built-in persona that refuses to invent facts
  persona               text,
  enabled               boolean NOT NULL DEFAULT true,
  -- the From of auto replies, checked against the sending-domain rules when set and again at each send
  -- (no foreign key: a deleted domain makes the send fail with a recorded reason)
  reply_from_domain_id  bigint,
  reply_from_address    text,
  created_at            timestamptz NOT NULL DEFAULT now(),
  updated_at            timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX agent_configs_user_id ON agent_configs (user_id, address_id);

CREATE TABLE agent_jobs (
  id                    bigserial PRIMARY KEY,
  user_id               bigint NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  address_id            bigint NOT NULL REFERENCES inbound_addresses(id) ON DELETE CASCADE,
  -- one job per inbound message: queuing the same message twice is a no-op
  message_id            bigint NOT NULL UNIQUE REFERENCES inbound_messages(id) ON DELETE CASCADE,
  -- pending (also between retries) → replied | drafted | skipped | failed
  status                text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'replied', 'drafted', 'skipped', 'failed')),
  -- why it was skipped or failed, or the last retryable error while pending; never provider text
  reason                text,
  attempt               integer NOT NULL DEFAULT 0,
  next_attempt_at       timestamptz,
  locked_until          timestamptz,
  -- the thread: the sender's address (lowercase) and the normalized subject
  sender                text,
  thread_key            text,
  -- the generated reply, kept so a retried send does not ask the AI again
  reply_text            text,
  -- set while an auto reply is being handed to outbound: an attempt interrupted there is never
  -- repeated (at most one reply), and it counts as "answered" for the thread meanwhile
  sending_at            timestamptz,
  -- outbound_messages.id of the sent reply (no foreign key: outbound owns that table)
  outbound_message_id   bigint,
  draft_id              bigint,
  created_at            timestamptz NOT NULL DEFAULT now(),
  finished_at           timestamptz
);
CREATE INDEX agent_jobs_due ON agent_jobs (next_attempt_at, id) WHERE status = 'pending';
CREATE INDEX agent_jobs_address ON agent_jobs (address_id, id);
-- "already answered this sender in this thread in the last 24 h"
CREATE INDEX agent_jobs_thread ON agent_jobs (address_id, sender, thread_key, finished_at) WHERE status IN ('replied', 'pending');

CREATE TABLE agent_drafts (
  id                    bigserial PRIMARY KEY,
  user_id               bigint NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  address_id            bigint NOT NULL REFERENCES inbound_addresses(id) ON DELETE CASCADE,
  message_id            bigint NOT NULL UNIQUE REFERENCES inbound_messages(id) ON DELETE CASCADE,
  -- who the reply would go to, and its subject and body as the AI wrote them
  to_address            text NOT NULL,
  subject               text NOT NULL,
  text_body             text NOT NULL,
  created_at            timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX agent_drafts_address ON agent_drafts (address_id, id);
