-- Large raw MIME kept as a file beside the database (effects/ports/MimeBlobs.ts), by default on the
-- embedded engine. PGlite writes every 8 KiB page of a stored body from WebAssembly, twice (the
-- relation and the WAL), on the thread every statement waits for; a 100 KiB message's raw MIME was
-- ~half of what a batch moved into it (bench/REPORT.md, MX ingest, 2026-11-27 second session).
--
-- A message whose body is in a blob has `body_blob` set to its key, and `raw` holds only the trace
-- header lines the MX put in front; the message as received is `raw` followed by the blob. Its
-- row in `batch.messages` names the key as `body_blob` and its `raw` piece covers the trace only.
--
-- A message to several accounts has a MIME row per account, all naming the one blob. The last
-- of them deleted (the retention purge, an address's or an account's deletion, through any
-- cascade) leaves the key in blob_garbage, in the same transaction; the files are removed from
-- there (src/workers/blob-garbage.ts), so no path that deletes rows needs to know about files. Two
-- such rows deleted by concurrent transactions may each see the other still there: that file is
-- left to the start-up sweep, which removes every file no row names.
ALTER TABLE inbound_mime ADD COLUMN body_blob text;
CREATE INDEX inbound_mime_body_blob ON inbound_mime (body_blob) WHERE body_blob IS NOT NULL;

CREATE TABLE blob_garbage (
  key        text PRIMARY KEY,
  created_at timestamptz NOT NULL DEFAULT now()
);

CREATE FUNCTION inbound_mime_blob_garbage() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM inbound_mime WHERE body_blob = OLD.body_blob) THEN
    INSERT INTO blob_garbage (key) VALUES (OLD.body_blob) ON CONFLICT DO NOTHING;
  END IF;
  RETURN NULL;
END
$$;
CREATE TRIGGER inbound_mime_blob_garbage AFTER DELETE ON inbound_mime
  FOR EACH ROW WHEN (OLD.body_blob IS NOT NULL) EXECUTE FUNCTION inbound_mime_blob_garbage();

-- ingest_batch_bytes (031) with the MIME row's body_blob; every other statement as it was. A row
-- without `body_blob` (an instance of the previous release) stores as before.
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
  -- The message rows, indexed by arrival (1-based: message i is msgs[i + 1]).
  msgs jsonb[] := ARRAY(SELECT jsonb_array_elements(batch -> 'messages'));
  -- Where each message's bytes start in `blob` (0-based, parallel to msgs).
  bases int4[] := ARRAY(SELECT (e #>> '{}')::int4 FROM jsonb_array_elements(batch -> 'bases') AS e);
  -- One message's copies while it is being admitted.
  destinations jsonb;
  i int4 := -1;
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
  debited int4;
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

  FOR destinations IN SELECT jsonb_array_elements(batch -> 'destinations') LOOP
    i := i + 1;
    live_addr := '{}'; live_rcpt := '{}'; live_user := '{}'; live_days := '{}';
    cost_users := '{}'; cost_tzs := '{}';
    FOR r IN SELECT jsonb_array_elements(destinations) LOOP
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

  INSERT INTO inbound_mime (id, user_id, raw, body_blob, size_bytes, message_refs, created_at)
  SELECT mime_ids[o], mime_user[o], substring(blob FROM bases[mime_i[o] + 1] + x.raw[1] + 1 FOR x.raw[2]), x.body_blob, x.size,
         mime_refs[o], x.at
    FROM generate_series(1, cardinality(mime_i)) AS o,
         jsonb_to_record(msgs[mime_i[o] + 1]) AS x (raw int4[], body_blob text, size int4, at timestamptz)
   ORDER BY o;

  INSERT INTO inbound_attachments (mime_id, position, filename, content_type, content_id, size, content)
  SELECT mime_ids[o], a.position, a.filename, a.content_type, a.content_id, a.size,
         substring(blob FROM bases[mime_i[o] + 1] + a.content[1] + 1 FOR a.content[2])
    FROM generate_series(1, cardinality(mime_i)) AS o,
         jsonb_to_recordset(msgs[mime_i[o] + 1] -> 'parts')
      AS a (position int4, filename text, content_type text, content_id text, size int4, content int4[])
   ORDER BY o, a.position;

  INSERT INTO inbound_messages (id, address_id, user_id, mime_id, from_addr, to_addr, envelope_from, subject, text_body,
                                html_body, headers, attachments, auth_results, message_id, size_bytes, received_at, expires_at, tls)
  SELECT message_ids[o], copy_addr[o], copy_user[o], mime_ids[copy_mime[o]], x.from_addr, copy_rcpt[o], x.envelope_from, x.subject,
         convert_from(substring(blob FROM bases[copy_i[o] + 1] + x.text[1] + 1 FOR x.text[2]), 'UTF8'),
         convert_from(substring(blob FROM bases[copy_i[o] + 1] + x.html[1] + 1 FOR x.html[2]), 'UTF8'),
         x.headers, x.attachments, x.auth_results, x.message_id, x.size, x.at,
         x.at + copy_days[o] * interval '24 hours', x.tls
    FROM generate_series(1, cardinality(copy_i)) AS o,
         jsonb_to_record(msgs[copy_i[o] + 1])
      AS x (from_addr text, envelope_from text, subject text, text int4[], html int4[], headers jsonb,
            attachments jsonb, auth_results jsonb, message_id text, size int4, at timestamptz, tls jsonb)
   ORDER BY o;

  UPDATE inbound_addresses a SET message_count = a.message_count + c.n, unread_count = a.unread_count + c.n
    FROM (SELECT copy_addr[o] AS id, count(*) AS n FROM generate_series(1, cardinality(copy_i)) AS o GROUP BY 1) AS c
   WHERE a.id = c.id;

  -- The debit: checked above against the locked balances, so every account's update must apply.
  UPDATE wallets w SET balance_tzs = w.balance_tzs - t.total, updated_at = now()
    FROM (SELECT copy_user[o] AS user_id, count(*) * price AS total FROM generate_series(1, cardinality(copy_i)) AS o GROUP BY 1) AS t
   WHERE w.user_id = t.user_id AND w.balance_tzs >= t.total;
  GET DIAGNOSTICS debited = ROW_COUNT;
  IF debited <> (SELECT count(DISTINCT x) FROM unnest(copy_user) AS x) THEN
    RAISE EXCEPTION 'ingest_batch_bytes: a locked wallet could not pay what it was checked for';
  END IF;

  -- One ledger row per copy; balance_after is the final balance plus what the account's later
  -- copies of this batch took.
  INSERT INTO ledger_entries (user_id, kind, amount_tzs, balance_after_tzs, reference_type, reference_id, description)
  SELECT c.user_id, 'debit', -price, wallet_left[array_position(wallet_users, c.user_id)] + price * c.later,
         'inbound_message', c.id::text, ''
    FROM (SELECT o, copy_user[o] AS user_id, message_ids[o] AS id,
                 count(*) OVER (PARTITION BY copy_user[o] ORDER BY o DESC) - 1 AS later
            FROM generate_series(1, cardinality(copy_i)) AS o) AS c
   ORDER BY c.o;

  RETURN json_build_object(
    'refused', to_json(refused),
    'stored', (SELECT json_agg(json_build_object('i', copy_i[o], 'id', message_ids[o], 'address_id', copy_addr[o], 'user_id', copy_user[o]) ORDER BY o)
                 FROM generate_series(1, cardinality(copy_i)) AS o),
    'wallets', to_json(wallet_users), 'balances', to_json(wallet_left));
END
$$;

-- CREATE OR REPLACE drops the function's SET clauses: the generic plans again (030, 031).
ALTER FUNCTION ingest_batch_bytes(jsonb, bytea) SET plan_cache_mode = force_generic_plan;
