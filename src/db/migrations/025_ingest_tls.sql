-- Since 024 the service commits through ingest_commit, which writes tls itself; this keeps the older
-- ingest_store (kept for a rolling upgrade's older instances) writing it as well.
-- ingest_store (012) also writes each message's `tls` (022): the session's {protocol, cipher}, or
-- null in plaintext (DECISIONS.md "TLS on the SMTP servers"). Same statements otherwise; the
-- messages rows gain `tls jsonb`.
CREATE OR REPLACE FUNCTION ingest_store(batch json) RETURNS json LANGUAGE plpgsql AS $$
DECLARE
  mime_ids int8[] := ARRAY(SELECT nextval('inbound_mime_id_seq') FROM generate_series(1, json_array_length(batch -> 'mime')));
  message_ids int8[] := ARRAY(SELECT nextval('inbound_messages_id_seq') FROM generate_series(1, json_array_length(batch -> 'messages')));
BEGIN
  INSERT INTO inbound_mime (id, user_id, raw, size_bytes, message_refs, created_at)
  SELECT mime_ids[m.ord], m.user_id, decode(m.trace, 'base64') || decode(m.body, 'base64'), m.size, m.refs, m.at
    FROM json_to_recordset(batch -> 'mime') AS m (ord int4, user_id int8, trace text, body text, size int4, refs int4, at timestamptz);

  INSERT INTO inbound_attachments (mime_id, position, filename, content_type, content_id, size, content)
  SELECT mime_ids[a.mime_ord], a.position, a.filename, a.content_type, a.content_id, a.size, decode(a.content, 'base64')
    FROM json_to_recordset(batch -> 'attachments')
      AS a (mime_ord int4, position int4, filename text, content_type text, content_id text, size int4, content text);

  INSERT INTO inbound_messages (id, address_id, user_id, mime_id, from_addr, to_addr, envelope_from, subject, text_body,
                                html_body, headers, attachments, auth_results, message_id, size_bytes, received_at, expires_at, tls)
  SELECT message_ids[x.ord], x.address_id, x.user_id, mime_ids[x.mime_ord], x.from_addr, x.to_addr, x.envelope_from, x.subject,
         x.text_body, x.html_body, x.headers, x.attachments, x.auth_results, x.message_id, x.size, x.received_at, x.expires_at, x.tls
    FROM json_to_recordset(batch -> 'messages')
      AS x (ord int4, mime_ord int4, address_id int8, user_id int8, from_addr text, to_addr text, envelope_from text, subject text,
            text_body text, html_body text, headers jsonb, attachments jsonb, auth_results jsonb, message_id text, size int4,
            received_at timestamptz, expires_at timestamptz, tls jsonb);

  UPDATE inbound_addresses a SET message_count = a.message_count + c.n, unread_count = a.unread_count + c.n
    FROM json_to_recordset(batch -> 'counters') AS c (address_id int8, n int8)
   WHERE a.id = c.address_id;

  RETURN json_build_object('mime', to_json(mime_ids), 'messages', to_json(message_ids));
END
$$;
