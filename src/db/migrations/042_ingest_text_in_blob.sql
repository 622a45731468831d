-- A large text body is stored once. A message whose body is kept as a file (033) and whose text
-- is a byte range of that body (a single text part in 7bit or 8bit, valid UTF-8 without NUL:
-- `text_crlf`, 039) wrote the text a second time as `text_body`, uncompressed in TOAST and again
-- in the WAL. Its row in `batch.messages` now may name that range instead, as `text_range`
-- ([start, length] within the body's file, the bytes as UTF-8 with every CR LF made LF) beside
-- an empty `text`; the copy then keeps the file's key (`text_blob`) and the range, its
-- `text_body` is '', and readers take the text from the file (effects/messages/blob-text.ts).
-- The file outlives the copy: it goes only with the last MIME row naming it (033), and a MIME
-- row only once no copy refers to it.
-- The preparer names a range only for texts of at least 16 KiB (effects/ingest/prepare.ts
-- `TEXT_IN_BLOB_BYTES`): smaller ones stay in the row, where a page reads them without a file.
-- PGlite, 100 KiB plain mail over 20 sessions, six interleaved pairs: 195.5 → 278.5 msgs/s, 7.56
-- → 4.86 ms of CPU a message (bench/REPORT.md, MX ingest, 2026-11-30 thirty-ninth session).
-- A row without `text_range` is stored as before, so an instance of the previous release calls
-- it unchanged.
ALTER TABLE inbound_messages ADD COLUMN text_blob text, ADD COLUMN text_range int4[];

CREATE OR REPLACE FUNCTION ingest_batch_bytes(batch jsonb, blob bytea) RETURNS json LANGUAGE plpgsql AS $$
DECLARE
  price CONSTANT int8 := (batch ->> 'price')::int8;
  addr_ids int8[];
  addr_users int8[];
  addr_days int4[];
  wallet_users int8[];
  wallet_left int8[];
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
  -- The account's balance after each copy's debit, copies in order (the ledger rows).
  copy_after int8[] := '{}';
  -- Copies per address and the total per account, as the loop admits them.
  count_addr int8[] := '{}';
  count_n int4[] := '{}';
  debit_user int8[] := '{}';
  debit_total int8[] := '{}';
  -- Every address the batch names, repeats and all: the rows to lock.
  wanted int8[] := '{}';
  stored json[] := '{}';
  mime_ids int8[];
  message_ids int8[];
  msgs CONSTANT jsonb := batch -> 'messages';
  bases CONSTANT int4[] := translate(batch ->> 'bases', '[]', '{}')::int4[];
  dests CONSTANT jsonb := batch -> 'destinations';
  destinations jsonb;
  r jsonb;
  j int4;
  u int4;
  c int4;
  run int8;
  live_addr int8[];
  live_rcpt text[];
  live_user int8[];
  live_days int4[];
  cost_users int8[];
  cost_tzs int8[];
  short int4;
  paid boolean;
BEGIN
  FOR i IN 0 .. jsonb_array_length(dests) - 1 LOOP
    destinations := dests -> i;
    FOR k IN 0 .. jsonb_array_length(destinations) - 1 LOOP
      wanted := wanted || ((destinations -> k) ->> 'address_id')::int8;
    END LOOP;
  END LOOP;

  -- Locked addresses that still route, then their wallets: one global order (addresses by id,
  -- then wallets by user id), so two batches on one account queue instead of deadlocking.
  SELECT coalesce(array_agg(x.id), '{}'), coalesce(array_agg(x.user_id), '{}'), coalesce(array_agg(x.retention_days), '{}')
    INTO addr_ids, addr_users, addr_days
    FROM (SELECT a.id, a.user_id, a.retention_days
            FROM inbound_addresses a LEFT JOIN receiving_domains d ON d.id = a.domain_id
           WHERE a.id = ANY (wanted)
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
      run := wallet_left[j];
      wallet_left[j] := wallet_left[j] - cost_tzs[u];
      c := array_position(debit_user, cost_users[u]);
      IF c IS NULL THEN
        debit_user := debit_user || cost_users[u];
        debit_total := debit_total || cost_tzs[u];
      ELSE
        debit_total[c] := debit_total[c] + cost_tzs[u];
      END IF;
      mime_i := mime_i || i;
      mime_user := mime_user || cost_users[u];
      mime_refs := mime_refs || (cost_tzs[u] / price)::int4;
      FOR j IN 1 .. cardinality(live_addr) LOOP
        CONTINUE WHEN live_user[j] <> cost_users[u];
        run := run - price;
        copy_i := copy_i || i;
        copy_mime := copy_mime || cardinality(mime_i);
        copy_addr := copy_addr || live_addr[j];
        copy_user := copy_user || live_user[j];
        copy_rcpt := copy_rcpt || live_rcpt[j];
        copy_days := copy_days || live_days[j];
        copy_after := copy_after || run;
        c := array_position(count_addr, live_addr[j]);
        IF c IS NULL THEN
          count_addr := count_addr || live_addr[j];
          count_n := count_n || 1;
        ELSE
          count_n[c] := count_n[c] + 1;
        END IF;
      END LOOP;
    END LOOP;
  END LOOP;

  IF cardinality(copy_i) = 0 THEN
    RETURN json_build_object('refused', to_json(refused), 'stored', '[]'::json, 'wallets', to_json(wallet_users), 'balances', to_json(wallet_left));
  END IF;

  mime_ids := ARRAY(SELECT nextval('inbound_mime_id_seq') FROM generate_series(1, cardinality(mime_i)));
  message_ids := ARRAY(SELECT nextval('inbound_messages_id_seq') FROM generate_series(1, cardinality(copy_i)));

  -- Every row in one statement (data-modifying WITH queries each run once, to completion); the
  -- foreign keys of the messages and parts are checked at its end, when the MIME rows are there.
  WITH mime AS (
    INSERT INTO inbound_mime (id, user_id, raw, body_blob, size_bytes, message_refs, created_at)
    SELECT mime_ids[o], mime_user[o], substring(blob FROM bases[mime_i[o] + 1] + x.raw[1] + 1 FOR x.raw[2]), x.body_blob, x.size,
           mime_refs[o], x.at
      FROM generate_series(1, cardinality(mime_i)) AS o,
           jsonb_to_record(msgs -> mime_i[o]) AS x (raw int4[], body_blob text, size int4, at timestamptz)
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
                                  html_body, headers, attachments, auth_results, message_id, size_bytes, received_at, expires_at, tls,
                                  text_blob, text_range)
    SELECT message_ids[o], copy_addr[o], copy_user[o], mime_ids[copy_mime[o]], x.from_addr, copy_rcpt[o], x.envelope_from, x.subject,
           CASE WHEN x.text_crlf
             THEN replace(convert_from(substring(blob FROM bases[copy_i[o] + 1] + x.text[1] + 1 FOR x.text[2]), 'UTF8'), E'\r\n', E'\n')
             ELSE convert_from(substring(blob FROM bases[copy_i[o] + 1] + x.text[1] + 1 FOR x.text[2]), 'UTF8') END,
           convert_from(substring(blob FROM bases[copy_i[o] + 1] + x.html[1] + 1 FOR x.html[2]), 'UTF8'),
           nullif(msgs -> copy_i[o] -> 'headers', 'null'), nullif(msgs -> copy_i[o] -> 'attachments', 'null'),
           nullif(msgs -> copy_i[o] -> 'auth_results', 'null'), x.message_id, x.size, x.at,
           x.at + copy_days[o] * interval '24 hours', nullif(msgs -> copy_i[o] -> 'tls', 'null'),
           CASE WHEN x.text_range IS NOT NULL THEN x.body_blob END, x.text_range
      FROM generate_series(1, cardinality(copy_i)) AS o,
           jsonb_to_record(msgs -> copy_i[o])
        AS x (from_addr text, envelope_from text, subject text, text int4[], text_crlf boolean, html int4[], message_id text,
              size int4, at timestamptz, body_blob text, text_range int4[])
  ), counters AS (
    UPDATE inbound_addresses a SET message_count = a.message_count + c.n, unread_count = a.unread_count + c.n
      FROM unnest(count_addr, count_n) AS c (id, n)
     WHERE a.id = c.id
  ), debit AS (
    -- Checked above against the locked balances, so every account's update must apply.
    UPDATE wallets w SET balance_tzs = w.balance_tzs - t.total, updated_at = now()
      FROM unnest(debit_user, debit_total) AS t (user_id, total)
     WHERE w.user_id = t.user_id AND w.balance_tzs >= t.total
    RETURNING w.user_id
  ), ledger AS (
    INSERT INTO ledger_entries (user_id, kind, amount_tzs, balance_after_tzs, reference_type, reference_id, description)
    SELECT copy_user[o], 'debit', -price, copy_after[o], 'inbound_message', message_ids[o]::text, ''
      FROM generate_series(1, cardinality(copy_i)) AS o
     ORDER BY o
  )
  SELECT count(*) = cardinality(debit_user) FROM debit INTO paid;
  IF NOT paid THEN
    RAISE EXCEPTION 'ingest_batch_bytes: a locked wallet could not pay what it was checked for';
  END IF;

  FOR o IN 1 .. cardinality(copy_i) LOOP
    stored := stored || json_build_object('i', copy_i[o], 'id', message_ids[o], 'address_id', copy_addr[o], 'user_id', copy_user[o]);
  END LOOP;
  RETURN json_build_object('refused', to_json(refused), 'stored', to_json(stored), 'wallets', to_json(wallet_users), 'balances', to_json(wallet_left));
END
$$;

-- CREATE OR REPLACE drops the function's SET clauses: the generic plans again (030, 031, 033).
ALTER FUNCTION ingest_batch_bytes(jsonb, bytea) SET plan_cache_mode = force_generic_plan;
