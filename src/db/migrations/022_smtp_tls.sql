-- TLS on the SMTP servers (DECISIONS.md "TLS on the SMTP servers"): the session's TLS facts,
-- {protocol, cipher}, or NULL when the message came in plaintext.
ALTER TABLE inbound_messages ADD COLUMN tls jsonb;
ALTER TABLE sandbox_messages ADD COLUMN tls jsonb;
