-- On the embedded engine (no lz4), a received message's rows stay whole in their table up to a
-- page: no TOAST below 8 KB.
--
-- Without lz4, text bodies and raw MIME are STORAGE EXTERNAL (012, 027), and PostgreSQL moves
-- such a value out of line as soon as its row passes ~2 KB (TOAST_TUPLE_TARGET), after first
-- trying pglz on the row's JSON columns. Ordinary mail (a 2 KiB message is a ~4 KB message row
-- and a ~2.3 KB MIME row) then cost a pglz attempt and a TOAST row and index entry per column
-- moved, all in WebAssembly on the thread every statement waits for: ~10 % of the batch call
-- (bench/REPORT.md, MX ingest, 2026-11-27 third session). With toast_tuple_target at its maximum
-- the toaster leaves a row alone until it would not fit a page; larger mail goes out of line as
-- before. A server with lz4 keeps its default: there compression is cheap and saves WAL.
DO $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = 'inbound_messages'::regclass AND attname = 'text_body' AND attcompression = 'l') THEN
    ALTER TABLE inbound_messages SET (toast_tuple_target = 8160);
    ALTER TABLE inbound_mime SET (toast_tuple_target = 8160);
    ALTER TABLE sandbox_messages SET (toast_tuple_target = 8160);
  END IF;
END
$$;
