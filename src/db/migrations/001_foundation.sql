-- Foundation: accounts (users) and their API keys; the auth middleware reads both.

CREATE TABLE users (
  id              bigserial PRIMARY KEY,
  name            text NOT NULL,
  company_name    text,
  -- stored lowercase; NULL when the account registered by phone only
  email           text UNIQUE,
  -- normalized +255 and 9 digits
  phone_number    text UNIQUE,
  -- NULL for Google-only accounts
  password_hash   text,
  email_verified  boolean NOT NULL DEFAULT false,
  phone_verified  boolean NOT NULL DEFAULT false,
  google_sub      text UNIQUE,
  disabled_at     timestamptz,
  created_at      timestamptz NOT NULL DEFAULT now(),
  updated_at      timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE api_keys (
  id            bigserial PRIMARY KEY,
  user_id       bigint NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  name          text NOT NULL,
  -- first 12 characters of the plaintext (MAIL_ + 7 hex), for display
  key_prefix    text NOT NULL,
  -- SHA-256 hex of the plaintext; the plaintext itself is never stored
  key_hash      text NOT NULL UNIQUE,
  scopes        text NOT NULL DEFAULT 'full',
  last_used_at  timestamptz,
  expires_at    timestamptz,
  revoked_at    timestamptz,
  created_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX api_keys_user_id ON api_keys (user_id) WHERE revoked_at IS NULL;
