-- Accounts: refresh-token families, email verification links, phone OTPs, and the buckets of the
-- generic rate limiter. Secrets are stored hashed only (SHA-256 for high-entropy tokens, a keyed
-- HMAC for 6-digit codes, whose small space a plain hash would not protect).

CREATE TABLE refresh_tokens (
  id          bigserial PRIMARY KEY,
  user_id     bigint NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  -- every rotation of one sign-in shares the family; re-using a rotated token revokes all of it
  family_id   text NOT NULL,
  token_hash  text NOT NULL UNIQUE,
  expires_at  timestamptz NOT NULL,
  -- set when this token was exchanged for its successor
  rotated_at  timestamptz,
  revoked_at  timestamptz,
  created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX refresh_tokens_family_id ON refresh_tokens (family_id);
CREATE INDEX refresh_tokens_user_id ON refresh_tokens (user_id);

-- One row per link sent: the link carries a signed token whose `jti` is hashed here, so a link
-- works once, and only while its row is unused and unexpired.
CREATE TABLE email_verifications (
  id          bigserial PRIMARY KEY,
  user_id     bigint NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  -- the address being verified (the current one, or the new one of an email change); lowercase
  email       text NOT NULL,
  token_hash  text NOT NULL UNIQUE,
  expires_at  timestamptz NOT NULL,
  used_at     timestamptz,
  created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX email_verifications_user_id ON email_verifications (user_id) WHERE used_at IS NULL;

-- One row per code sent; a newer code replaces the older ones of the account.
CREATE TABLE phone_verifications (
  id            bigserial PRIMARY KEY,
  user_id       bigint NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  -- normalized +255 and 9 digits
  phone_number  text NOT NULL,
  code_hash     text NOT NULL,
  attempts      integer NOT NULL DEFAULT 0,
  expires_at    timestamptz NOT NULL,
  used_at       timestamptz,
  created_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX phone_verifications_user_id ON phone_verifications (user_id) WHERE used_at IS NULL;

-- Generic rate limiter (effects/ratelimit): one row per bucket, GCRA. `tat_ms` is the bucket's
-- "theoretical arrival time" in Unix milliseconds; a row whose tat_ms is in the past is a full
-- bucket and can be deleted at any time.
CREATE TABLE rate_limits (
  key     text PRIMARY KEY,
  tat_ms  bigint NOT NULL
);
CREATE INDEX rate_limits_tat_ms ON rate_limits (tat_ms);
