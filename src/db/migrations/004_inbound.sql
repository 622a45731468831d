-- Inbound: compliance profiles, receiving domains, addresses, the messages they receive, and
-- the raw MIME and attachment bytes behind those messages.

CREATE TABLE compliance_profiles (
  id                       bigserial PRIMARY KEY,
  user_id                  bigint NOT NULL UNIQUE REFERENCES users(id) ON DELETE CASCADE,
  pdpc_registered          boolean NOT NULL DEFAULT false,
  pdpc_certificate_number  text,
  pdpc_registered_at       date,
  default_retention_days   integer NOT NULL DEFAULT 30 CHECK (default_retention_days BETWEEN 1 AND 3650),
  data_consent_at          timestamptz,
  privacy_policy_version   text,
  updated_at               timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE receiving_domains (
  id                  bigserial PRIMARY KEY,
  user_id             bigint NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  -- lowercase, no trailing dot
  domain              text NOT NULL,
  status              text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'verified', 'suspended')),
  -- 64 hex; published as TXT `mail-verify=<token>`
  verification_token  text NOT NULL,
  verified_at         timestamptz,
  last_checked_at     timestamptz,
  -- when the re-check worker looks at a verified/suspended domain again; NULL while pending
  next_check_at       timestamptz,
  -- worker lease (src/workers/worker.ts)
  locked_until        timestamptz,
  created_at          timestamptz NOT NULL DEFAULT now()
);
-- One claim per account. Several accounts may hold pending claims on the same name (so nobody can
-- squat a domain by adding it first), but only one can have it verified: whoever controls DNS.
CREATE UNIQUE INDEX receiving_domains_user_domain ON receiving_domains (user_id, domain);
CREATE UNIQUE INDEX receiving_domains_domain_routed ON receiving_domains (domain) WHERE status <> 'pending';
CREATE INDEX receiving_domains_next_check ON receiving_domains (next_check_at) WHERE status <> 'pending';

CREATE TABLE inbound_addresses (
  id              bigserial PRIMARY KEY,
  user_id         bigint NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  local_part      text NOT NULL,
  label           text,
  -- NULL means the platform domain; no cascade: a domain with addresses cannot be deleted
  domain_id       bigint REFERENCES receiving_domains(id),
  retention_days  integer NOT NULL DEFAULT 30 CHECK (retention_days BETWEEN 1 AND 3650),
  -- kept in step with inbound_messages so listing needs no count(*) over a million rows
  message_count   bigint NOT NULL DEFAULT 0,
  unread_count    bigint NOT NULL DEFAULT 0,
  created_at      timestamptz NOT NULL DEFAULT now()
);
-- unique per domain across all accounts (NULL = platform domain counts as one domain)
CREATE UNIQUE INDEX inbound_addresses_local_part_domain ON inbound_addresses (local_part, COALESCE(domain_id, 0));
CREATE INDEX inbound_addresses_user_id ON inbound_addresses (user_id);
CREATE INDEX inbound_addresses_domain_id ON inbound_addresses (domain_id) WHERE domain_id IS NOT NULL;

-- The message as received (trace headers prepended), stored once per SMTP transaction and account
-- even when it went to several of that account's addresses.
CREATE TABLE inbound_mime (
  id          bigserial PRIMARY KEY,
  user_id     bigint NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  raw         bytea NOT NULL,
  size_bytes  integer NOT NULL,
  -- how many inbound_messages point here; the row (and its attachments) goes when it reaches 0
  message_refs integer NOT NULL DEFAULT 0,
  created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX inbound_mime_user_id ON inbound_mime (user_id);
CREATE INDEX inbound_mime_unreferenced ON inbound_mime (id) WHERE message_refs <= 0;

CREATE TABLE inbound_attachments (
  id            bigserial PRIMARY KEY,
  mime_id       bigint NOT NULL REFERENCES inbound_mime(id) ON DELETE CASCADE,
  position      integer NOT NULL,
  filename      text NOT NULL DEFAULT '',
  content_type  text NOT NULL,
  -- Content-ID without brackets, for inline images referenced as cid: in the HTML
  content_id    text,
  size          integer NOT NULL,
  content       bytea NOT NULL
);
CREATE INDEX inbound_attachments_mime_id ON inbound_attachments (mime_id, position);

CREATE TABLE inbound_messages (
  id             bigserial PRIMARY KEY,
  address_id     bigint NOT NULL REFERENCES inbound_addresses(id) ON DELETE CASCADE,
  user_id        bigint NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  -- no cascade: the MIME row is deleted once no message refers to it any more
  mime_id        bigint REFERENCES inbound_mime(id),
  from_addr      text NOT NULL DEFAULT '',
  to_addr        text NOT NULL DEFAULT '',
  -- SMTP MAIL FROM ('' for bounces)
  envelope_from  text NOT NULL DEFAULT '',
  subject        text NOT NULL DEFAULT '',
  text_body      text NOT NULL DEFAULT '',
  html_body      text NOT NULL DEFAULT '',
  headers        jsonb NOT NULL DEFAULT '{}'::jsonb,
  -- [{filename, content_type, size, content_id}]; the bytes live in inbound_attachments
  attachments    jsonb NOT NULL DEFAULT '[]'::jsonb,
  -- SPF/DKIM/DMARC/ARC verdicts from mailauth at receipt
  auth_results   jsonb NOT NULL DEFAULT '{}'::jsonb,
  message_id     text,
  size_bytes     integer NOT NULL DEFAULT 0,
  is_read        boolean NOT NULL DEFAULT false,
  received_at    timestamptz NOT NULL DEFAULT now(),
  -- received_at + the address's retention; the retention worker deletes past it
  expires_at     timestamptz NOT NULL
);
-- Listing newest first per address, optionally unread only. The order key is -id rather than
-- id DESC: no other index yields it, so the planner cannot swap in a backward primary-key scan
-- that filters out every newer row of other addresses (an address whose mail is older than the
-- rest of the table took 20-40 ms per page that way at 100k rows; this way it is an index range).
CREATE INDEX inbound_messages_address_newest ON inbound_messages (address_id, (-id));
CREATE INDEX inbound_messages_address_unread ON inbound_messages (address_id, (-id)) WHERE NOT is_read;
CREATE INDEX inbound_messages_expires_at ON inbound_messages (expires_at);
CREATE INDEX inbound_messages_user_id ON inbound_messages (user_id);
CREATE INDEX inbound_messages_mime_id ON inbound_messages (mime_id);
