-- Sandbox: disposable SMTP credentials, the account's one SMTP login, the messages the capture
-- server took (never delivered) and the per-month count that enforces the capture allowance.

-- client_id/client_secret pairs; only the secret's SHA-256 is kept.
CREATE TABLE sandbox_credentials (
  id                    bigserial PRIMARY KEY,
  user_id               bigint NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  -- `sbx_` + 24 hex; the SMTP AUTH username
  client_id             text NOT NULL UNIQUE,
  -- SHA-256 (hex) of `sbs_` + 64 hex
  client_secret_hash    text NOT NULL,
  -- the secret's first 12 characters, to recognise it in a list
  client_secret_prefix  text NOT NULL,
  -- `full` or a comma list of sandbox scopes (effects/sandbox/schema.ts)
  scopes                text NOT NULL DEFAULT 'full',
  last_used_at          timestamptz,
  revoked_at            timestamptz,
  created_at            timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX sandbox_credentials_user_id ON sandbox_credentials (user_id, id);

-- The account's SMTP username/password (GET /api/sandbox/credentials/smtp creates it).
CREATE TABLE sandbox_smtp_logins (
  user_id          bigint PRIMARY KEY REFERENCES users(id) ON DELETE CASCADE,
  -- `sbu_` + 16 hex
  username         text NOT NULL UNIQUE,
  -- SHA-256 (hex) of the password; replaced by regenerate
  password_hash    text NOT NULL,
  password_set_at  timestamptz NOT NULL,
  last_used_at     timestamptz,
  created_at       timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE sandbox_messages (
  id             bigserial PRIMARY KEY,
  user_id        bigint NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  -- the credential that submitted it; NULL for the account's SMTP login (or a deleted credential)
  credential_id  bigint REFERENCES sandbox_credentials(id) ON DELETE SET NULL,
  -- MAIL FROM ('' for the null sender)
  envelope_from  text NOT NULL,
  from_addr      text NOT NULL,
  -- the first envelope recipient; `recipients` holds all of them, in order
  to_addr        text NOT NULL,
  recipients     jsonb NOT NULL,
  subject        text NOT NULL,
  text_body      text NOT NULL,
  html_body      text NOT NULL,
  headers        jsonb NOT NULL,
  -- metadata [{filename, content_type, size, content_id}]; the bytes are in sandbox_attachments
  attachments    jsonb NOT NULL,
  message_id     text,
  size           integer NOT NULL,
  -- the message exactly as submitted
  raw            bytea NOT NULL,
  received_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX sandbox_messages_user_id ON sandbox_messages (user_id, id);

CREATE TABLE sandbox_attachments (
  message_id    bigint NOT NULL REFERENCES sandbox_messages(id) ON DELETE CASCADE,
  position      integer NOT NULL,
  filename      text NOT NULL DEFAULT '',
  content_type  text NOT NULL,
  content_id    text,
  size          integer NOT NULL,
  content       bytea NOT NULL,
  PRIMARY KEY (message_id, position)
);

-- Captures per account and calendar month (UTC). Kept apart from sandbox_messages so clearing
-- the captured messages does not give the month's allowance back.
CREATE TABLE sandbox_usage (
  user_id   bigint NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  -- first day of the month
  month     date NOT NULL,
  captured  integer NOT NULL DEFAULT 0,
  PRIMARY KEY (user_id, month)
);
