-- Inbound: compliance profiles, receiving domains, addresses and the messages they receive.

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
  domain              text NOT NULL UNIQUE,
  -- pending, verified, suspended
  status              text NOT NULL DEFAULT 'pending',
  verification_token  text NOT NULL,
  verified_at         timestamptz,
  last_checked_at     timestamptz,
  created_at          timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX receiving_domains_user_id ON receiving_domains (user_id);

CREATE TABLE inbound_addresses (
  id              bigserial PRIMARY KEY,
  user_id         bigint NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  local_part      text NOT NULL,
  label           text,
  -- NULL means the platform domain
  domain_id       bigint REFERENCES receiving_domains(id),
  retention_days  integer NOT NULL DEFAULT 30,
  created_at      timestamptz NOT NULL DEFAULT now()
);
-- unique per domain across all accounts (NULL = platform domain counts as one domain)
CREATE UNIQUE INDEX inbound_addresses_local_part_domain ON inbound_addresses (local_part, COALESCE(domain_id, 0));
CREATE INDEX inbound_addresses_user_id ON inbound_addresses (user_id);

CREATE TABLE inbound_messages (
  id           bigserial PRIMARY KEY,
  address_id   bigint NOT NULL REFERENCES inbound_addresses(id) ON DELETE CASCADE,
  user_id      bigint NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  from_addr    text NOT NULL DEFAULT '',
  to_addr      text NOT NULL DEFAULT '',
  subject      text NOT NULL DEFAULT '',
  text_body    text NOT NULL DEFAULT '',
  html_body    text NOT NULL DEFAULT '',
  headers      jsonb NOT NULL DEFAULT '{}'::jsonb,
  is_read      boolean NOT NULL DEFAULT false,
  received_at  timestamptz NOT NULL DEFAULT now(),
  -- received_at + the address's retention; the retention worker deletes past it
  expires_at   timestamptz NOT NULL
);
-- listing newest first per address, optionally unread only
CREATE INDEX inbound_messages_address_id_id ON inbound_messages (address_id, id DESC);
CREATE INDEX inbound_messages_address_unread ON inbound_messages (address_id, id DESC) WHERE NOT is_read;
CREATE INDEX inbound_messages_expires_at ON inbound_messages (expires_at);
