-- Raw MIME and attachment bytes are compressed with lz4 where the server has it. 012 kept them out
-- of line without compression because pglz spent CPU on every stored message; lz4 costs about the
-- same as no compression on bytes that do not compress (base64 attachments: 0.55 vs 0.36-0.66 ms
-- per 100 KiB row, PostgreSQL 15 on the 2-core machine) and about a tenth of it on bytes that do
-- (text bodies: 0.1 vs 0.86 ms per pair of 100 KiB rows, less WAL and TOAST to write).
-- PGlite is built without lz4: there they stay out of line uncompressed (012), which measured no
-- slower than pglz in WASM.
DO $$
BEGIN
  ALTER TABLE inbound_mime ALTER COLUMN raw SET STORAGE EXTENDED, ALTER COLUMN raw SET COMPRESSION lz4;
  ALTER TABLE inbound_attachments ALTER COLUMN content SET STORAGE EXTENDED, ALTER COLUMN content SET COMPRESSION lz4;
  ALTER TABLE sandbox_messages ALTER COLUMN raw SET STORAGE EXTENDED, ALTER COLUMN raw SET COMPRESSION lz4;
  ALTER TABLE sandbox_attachments ALTER COLUMN content SET STORAGE EXTENDED, ALTER COLUMN content SET COMPRESSION lz4;
EXCEPTION WHEN feature_not_supported THEN
  NULL;
END
$$;
