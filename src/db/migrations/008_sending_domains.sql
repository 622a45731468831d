-- Sending domains (the account's own domains it sends from, proven by DKIM, SPF and DMARC
-- records) and the sender addresses (From local parts) recorded on them.

CREATE TABLE sending_domains (
  id                       bigserial PRIMARY KEY,
  user_id                  bigint NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  -- lowercase, no trailing dot
  domain                   text NOT NULL,
  status                   text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'verified', 'suspended')),
  -- the domain's default sender (`noreply` unless chosen at creation)
  from_local_part          text NOT NULL CHECK (from_local_part ~ '^[a-z0-9-]{1,64}$'),
  -- base64 SubjectPublicKeyInfo, published as `p=` at mail._domainkey.<domain>
  dkim_public_key          text NOT NULL,
  -- PKCS#8 PEM, AES-256-GCM under SECRETS_KEY (context "sending_domains.dkim_private_key"); never plaintext
  dkim_private_key_sealed  text NOT NULL,
  verified_at              timestamptz,
  last_checked_at          timestamptz,
  -- when the re-check worker looks at a verified/suspended domain again; NULL while pending
  next_check_at            timestamptz,
  -- worker lease (src/workers/worker.ts)
  locked_until             timestamptz,
  created_at               timestamptz NOT NULL DEFAULT now()
);
-- One claim per account. Several accounts may hold pending claims on a name (nobody can squat a
-- domain by adding it first), but only one can have it verified: whoever controls its DNS.
CREATE UNIQUE INDEX sending_domains_user_domain ON sending_domains (user_id, domain);
CREATE UNIQUE INDEX sending_domains_domain_verified ON sending_domains (domain) WHERE status <> 'pending';
CREATE INDEX sending_domains_next_check ON sending_domains (next_check_at) WHERE status <> 'pending';

CREATE TABLE sender_addresses (
  id          bigserial PRIMARY KEY,
  user_id     bigint NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  domain_id   bigint NOT NULL REFERENCES sending_domains(id) ON DELETE CASCADE,
  local_part  text NOT NULL CHECK (local_part ~ '^[a-z0-9-]{1,64}$'),
  -- the domain's default local part, written with the domain: listed once the domain is
  -- verified, not counted against the sender limit, deleted only with the domain
  is_default  boolean NOT NULL DEFAULT false,
  created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX sender_addresses_domain_local_part ON sender_addresses (domain_id, local_part);
CREATE INDEX sender_addresses_user_id ON sender_addresses (user_id, id);
