-- 0004: a guild's replaced or removed API keys, kept (encrypted) until their last job ends.
-- A task belongs to the key that submitted it (its status can only be read with that key), so
-- the key of a pending job outlives its removal from guild_settings.

CREATE TABLE retired_keys (
    id          INTEGER PRIMARY KEY,
    guild_id    INTEGER NOT NULL,
    -- bot.services.keys.fingerprint of the key; NULL when it could not be decrypted when it was
    -- retired (filled in when it first is).
    fingerprint TEXT,
    ciphertext  BLOB NOT NULL,
    last4       TEXT NOT NULL,
    retired_at  REAL NOT NULL,
    UNIQUE (guild_id, fingerprint)
) STRICT;

-- Pending jobs per key: what counts "jobs still running on the old key", and the trigger below.
CREATE INDEX jobs_pending_key ON jobs (guild_id, key_fingerprint) WHERE status = 'pending';

-- When a guild's last pending job on a retired key ends, the key is deleted, whoever ended the
-- job (the poller, a later fetch): the rule lives with the data.
CREATE TRIGGER retired_key_released AFTER UPDATE OF status ON jobs
WHEN OLD.status = 'pending' AND NEW.status <> 'pending'
BEGIN
    DELETE FROM retired_keys
    WHERE guild_id = NEW.guild_id
      AND fingerprint = NEW.key_fingerprint
      AND NOT EXISTS (
          SELECT 1 FROM jobs
          WHERE guild_id = NEW.guild_id AND key_fingerprint = NEW.key_fingerprint
            AND status = 'pending'
      );
END;
