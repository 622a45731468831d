-- Every change that matters to authentication is published when its transaction commits, so the
-- in-memory principal cache of every instance drops the key or account at once (src/db/auth-changes.ts).
-- The channel is named after the table's schema: channels are database-wide, and several schemas
-- (test runs, tenants) may share a database.
CREATE FUNCTION app_auth_notify() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  channel text := 'app_auth_' || left(md5(TG_TABLE_SCHEMA), 16);
BEGIN
  IF TG_TABLE_NAME = 'api_keys' THEN
    PERFORM pg_notify(channel, 'k|' || OLD.key_hash);
    IF TG_OP = 'UPDATE' AND NEW.key_hash IS DISTINCT FROM OLD.key_hash THEN
      PERFORM pg_notify(channel, 'k|' || NEW.key_hash);
    END IF;
  ELSE
    PERFORM pg_notify(channel, 'u|' || OLD.id);
  END IF;
  RETURN NULL;
END
$$;

-- Not on last_used_at (written in batches) nor on verification or profile fields.
CREATE TRIGGER api_keys_auth_changes AFTER UPDATE OF revoked_at, expires_at, scopes, user_id, key_hash OR DELETE ON api_keys
  FOR EACH ROW EXECUTE FUNCTION app_auth_notify();
CREATE TRIGGER users_auth_changes AFTER UPDATE OF disabled_at OR DELETE ON users
  FOR EACH ROW EXECUTE FUNCTION app_auth_notify();
