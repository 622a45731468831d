-- ingest_batch_bytes (035) reads a text body from the raw MIME it stores anyway when the row says
-- so: `text` then names the body's own bytes within the message's raw range, and `text_crlf` that
-- the text is those bytes as UTF-8 with every CR LF made LF. For a single text part in 7bit or
-- 8bit (most machine-sent mail) the text is a copy of the body, and sending it a second time was
-- ~40 % of a 2 KiB message's bytes in the call's blob: base64-encoded by the event loop, written to
-- the socket, decoded by the server (bench/REPORT.md, MX ingest, 2026-11-29 twentieth session).
-- The preparer sets it only for bytes that are valid UTF-8 without NUL, which convert_from takes.
-- A row without `text_crlf` is read as before, so an instance of the previous release calls it
-- unchanged.
CREATE OR REPLACE FUNCTION ingest_batch_bytes(batch jsonb, blob bytea) RETURNS json LANGUAGE plpgsql AS $$
DECLARE
  price CONSTANT int8 := (batch ->> 'price')::int8;
  -- Locked addresses that still route, and locked wallets (parallel arrays; a batch names few).
  addr_ids int8[];
  addr_users int8[];
  addr_days int4[];
  wallet_users int8[];
  wallet_left int8[];
  -- What the admission decided: refusals, then one entry per MIME row and per copy.
  refused json[] := '{}';
  mime_i int4[] := '{}';
  mime_user int8[] := '{}';
  mime_refs int4[] := '{}';
  copy_i int4[] := '{}';
  copy_mime int4[] := '{}';
  copy_addr int8[] := '{}';
  copy_user int8[] := '{}';
  copy_rcpt text[] := '{}';
  copy_days int4[] := '{}';
  mime_ids int8[];
  message_ids int8[];
  -- The message rows, indexed by arrival from 0 (message i is msgs -> i).
  msgs CONSTANT jsonb := batch -> 'messages';
  -- Where each message's bytes start in `blob` (0-based; message i's is bases[i + 1]). The JSON
  -- array's text made an array literal: an expression, where ARRAY(SELECT …) is a query.
  bases CONSTANT int4[] := translate(batch ->> 'bases', '[]', '{}')::int4[];
  dests CONSTANT jsonb := batch -> 'destinations';
  -- One message's copies while it is being admitted.
  destinations jsonb;
  r jsonb;
  j int4;
  u int4;
  live_addr int8[];
  live_rcpt text[];
  live_user int8[];
  live_days int4[];
  cost_users int8[];
  cost_tzs int8[];
  short int4;
  paid boolean;
BEGIN
  SELECT coalesce(array_agg(x.id), '{}'), coalesce(array_agg(x.user_id), '{}'), coalesce(array_agg(x.retention_days), '{}')
    INTO addr_ids, addr_users, addr_days
    FROM (SELECT a.id, a.user_id, a.retention_days
            FROM inbound_addresses a LEFT JOIN receiving_domains d ON d.id = a.domain_id
           WHERE a.id IN (SELECT (e ->> 'address_id')::int8 FROM jsonb_array_elements(batch -> 'destinations') AS m, jsonb_array_elements(m) AS e)
             AND (a.domain_id IS NULL OR d.status = 'verified')
           ORDER BY a.id FOR NO KEY UPDATE OF a) AS x;

  SELECT coalesce(array_agg(x.user_id), '{}'), coalesce(array_agg(x.balance_tzs), '{}')
    INTO wallet_users, wallet_left
    FROM (SELECT w.user_id, w.balance_tzs FROM wallets w WHERE w.user_id = ANY (addr_users) ORDER BY w.user_id FOR UPDATE) AS x;

  FOR i IN 0 .. jsonb_array_length(dests) - 1 LOOP
    destinations := dests -> i;
    live_addr := '{}'; live_rcpt := '{}'; live_user := '{}'; live_days := '{}';
    cost_users := '{}'; cost_tzs := '{}';
    FOR k IN 0 .. jsonb_array_length(destinations) - 1 LOOP
      r := destinations -> k;
      j := array_position(addr_ids, (r ->> 'address_id')::int8);
      CONTINUE WHEN j IS NULL;
      live_addr := live_addr || addr_ids[j];
      live_rcpt := live_rcpt || (r ->> 'rcpt');
      live_user := live_user || addr_users[j];
      live_days := live_days || addr_days[j];
      u := array_position(cost_users, addr_users[j]);
      IF u IS NULL THEN
        cost_users := cost_users || addr_users[j];
        cost_tzs := cost_tzs || price;
      ELSE
        cost_tzs[u] := cost_tzs[u] + price;
      END IF;
    END LOOP;

    IF cardinality(live_addr) = 0 THEN
      refused := refused || json_build_object('i', i, 'reason', 'unknown');
      CONTINUE;
    END IF;
    short := NULL;
    FOR u IN 1 .. cardinality(cost_users) LOOP
      j := array_position(wallet_users, cost_users[u]);
      IF coalesce(wallet_left[j], 0) < cost_tzs[u] THEN
        short := u;
        EXIT;
      END IF;
    END LOOP;
    IF short IS NOT NULL THEN
      refused := refused || json_build_object('i', i, 'reason', 'balance', 'required', cost_tzs[short],
                                              'balance', coalesce(wallet_left[array_position(wallet_users, cost_users[short])], 0));
      CONTINUE;
    END IF;

    -- Admitted: the money is taken from what is left, and its rows are laid out account by
    -- account (in the order the recipients named them), copies in RCPT order.
    FOR u IN 1 .. cardinality(cost_users) LOOP
      j := array_position(wallet_users, cost_users[u]);
      wallet_left[j] := wallet_left[j] - cost_tzs[u];
      mime_i := mime_i || i;
      mime_user := mime_user || cost_users[u];
      mime_refs := mime_refs || (cost_tzs[u] / price)::int4;
      FOR j IN 1 .. cardinality(live_addr) LOOP
        CONTINUE WHEN live_user[j] <> cost_users[u];
        copy_i := copy_i || i;
        copy_mime := copy_mime || cardinality(mime_i);
        copy_addr := copy_addr || live_addr[j];
        copy_user := copy_user || live_user[j];
        copy_rcpt := copy_rcpt || live_rcpt[j];
        copy_days := copy_days || live_days[j];
      END LOOP;
    END LOOP;
  END LOOP;

  IF cardinality(copy_i) = 0 THEN
    RETURN json_build_object('refused', to_json(refused), 'stored', '[]'::json, 'wallets', to_json(wallet_users), 'balances', to_json(wallet_left));
  END IF;

  mime_ids := ARRAY(SELECT nextval('inbound_mime_id_seq') FROM generate_series(1, cardinality(mime_i)));
  message_ids := ARRAY(SELECT nextval('inbound_messages_id_seq') FROM generate_series(1, cardinality(copy_i)));

  -- Every row in one statement (data-modifying WITH queries each run once, to completion): one
  -- executor start instead of six, which on PGlite was most of what a statement costs. The
  -- foreign keys of the messages and parts are checked at its end, when the MIME rows are there.
  WITH mime AS (
    INSERT INTO inbound_mime (id, user_id, raw, body_blob, size_bytes, message_refs, created_at)
    SELECT mime_ids[o], mime_user[o], substring(blob FROM bases[mime_i[o] + 1] + x.raw[1] + 1 FOR x.raw[2]), x.body_blob, x.size,
           mime_refs[o], x.at
      FROM generate_series(1, cardinality(mime_i)) AS o,
           jsonb_to_record(msgs -> mime_i[o]) AS x (raw int4[], body_blob text, size int4, at timestamptz)
     ORDER BY o
  ), parts AS (
    INSERT INTO inbound_attachments (mime_id, position, filename, content_type, content_id, size, content)
    SELECT mime_ids[o], a.position, a.filename, a.content_type, a.content_id, a.size,
           substring(blob FROM bases[mime_i[o] + 1] + a.content[1] + 1 FOR a.content[2])
      FROM generate_series(1, cardinality(mime_i)) AS o,
           jsonb_to_recordset(msgs -> mime_i[o] -> 'parts')
        AS a (position int4, filename text, content_type text, content_id text, size int4, content int4[])
     ORDER BY o, a.position
  ), copies AS (
    INSERT INTO inbound_messages (id, address_id, user_id, mime_id, from_addr, to_addr, envelope_from, subject, text_body,
                                  html_body, headers, attachments, auth_results, message_id, size_bytes, received_at, expires_at, tls)
    SELECT message_ids[o], copy_addr[o], copy_user[o], mime_ids[copy_mime[o]], x.from_addr, copy_rcpt[o], x.envelope_from, x.subject,
           CASE WHEN x.text_crlf
             THEN replace(convert_from(substring(blob FROM bases[copy_i[o] + 1] + x.text[1] + 1 FOR x.text[2]), 'UTF8'), E'\r\n', E'\n')
             ELSE convert_from(substring(blob FROM bases[copy_i[o] + 1] + x.text[1] + 1 FOR x.text[2]), 'UTF8') END,
           convert_from(substring(blob FROM bases[copy_i[o] + 1] + x.html[1] + 1 FOR x.html[2]), 'UTF8'),
           x.headers, x.attachments, x.auth_results, x.message_id, x.size, x.at,
           x.at + copy_days[o] * interval '24 hours', x.tls
      FROM generate_series(1, cardinality(copy_i)) AS o,
           jsonb_to_record(msgs -> copy_i[o])
        AS x (from_addr text, envelope_from text, subject text, text int4[], text_crlf boolean, html int4[], headers jsonb,
              attachments jsonb, auth_results jsonb, message_id text, size int4, at timestamptz, tls jsonb)
     ORDER BY o
  ), counters AS (
    UPDATE inbound_addresses a SET message_count = a.message_count + c.n, unread_count = a.unread_count + c.n
      FROM (SELECT copy_addr[o] AS id, count(*) AS n FROM generate_series(1, cardinality(copy_i)) AS o GROUP BY 1) AS c
     WHERE a.id = c.id
  ), debit AS (
    -- Checked above against the locked balances, so every account's update must apply.
    UPDATE wallets w SET balance_tzs = w.balance_tzs - t.total, updated_at = now()
      FROM (SELECT copy_user[o] AS user_id, count(*) * price AS total FROM generate_series(1, cardinality(copy_i)) AS o GROUP BY 1) AS t
     WHERE w.user_id = t.user_id AND w.balance_tzs >= t.total
    RETURNING w.user_id
  ), ledger AS (
    -- One ledger row per copy; balance_after is the final balance plus what the account's later
    -- copies of this batch took.
    INSERT INTO ledger_entries (user_id, kind, amount_tzs, balance_after_tzs, reference_type, reference_id, description)
    SELECT c.user_id, 'debit', -price, wallet_left[array_position(wallet_users, c.user_id)] + price * c.later,
           'inbound_message', c.id::text, ''
      FROM (SELECT o, copy_user[o] AS user_id, message_ids[o] AS id,
                   count(*) OVER (PARTITION BY copy_user[o] ORDER BY o DESC) - 1 AS later
              FROM generate_series(1, cardinality(copy_i)) AS o) AS c
     ORDER BY c.o
  )
  SELECT (SELECT count(*) FROM debit) = (SELECT count(DISTINCT x) FROM unnest(copy_user) AS x) INTO paid;
  IF NOT paid THEN
    RAISE EXCEPTION 'ingest_batch_bytes: a locked wallet could not pay what it was checked for';
  END IF;

  RETURN json_build_object(
    'refused', to_json(refused),
    'stored', (SELECT json_agg(json_build_object('i', copy_i[o], 'id', message_ids[o], 'address_id', copy_addr[o], 'user_id', copy_user[o]) ORDER BY o)
                 FROM generate_series(1, cardinality(copy_i)) AS o),
    'wallets', to_json(wallet_users), 'balances', to_json(wallet_left));
END
$$;


-- CREATE OR REPLACE drops the function's SET clauses: the generic plans again (030, 031, 033).
ALTER FUNCTION ingest_batch_bytes(jsonb, bytea) SET plan_cache_mode = force_generic_plan;
