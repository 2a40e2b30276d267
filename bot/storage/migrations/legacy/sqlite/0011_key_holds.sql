-- 0011: a key stays while anything made with it is live.
--
-- A reservation is a request in flight: its POST may be charged and its task stored a moment
-- later with the key's fingerprint. Replacing or removing a guild's key while it is in flight
-- must therefore keep the key, as a pending job on it does. NULL: a reservation made before
-- this version (the key is unknown; it expires within minutes and holds every key of its guild
-- until then).
ALTER TABLE reservations ADD COLUMN key_fingerprint TEXT;

-- The bot's default key (GENAPI_API_KEY), encrypted with KEY_ENCRYPTION_KEY like guilds' keys:
-- the one each process started with (retired_at NULL), and the previous ones (retired_at set)
-- while a pending job or a reservation uses them. Without KEY_ENCRYPTION_KEY nothing is kept.
CREATE TABLE default_keys (
    fingerprint TEXT PRIMARY KEY,
    ciphertext  BLOB NOT NULL,
    stored_at   REAL NOT NULL,
    retired_at  REAL
) STRICT;

-- Pending jobs per key, whatever their guild: the default key's jobs span guilds.
CREATE INDEX jobs_pending_fingerprint ON jobs (key_fingerprint) WHERE status = 'pending';

-- 0004's trigger, now also waiting for the key's reservations, and releasing default keys.
DROP TRIGGER retired_key_released;
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
      )
      AND NOT EXISTS (
          SELECT 1 FROM reservations
          WHERE guild_id = NEW.guild_id
            AND (key_fingerprint = NEW.key_fingerprint OR key_fingerprint IS NULL)
      );
    DELETE FROM default_keys
    WHERE fingerprint = NEW.key_fingerprint
      AND retired_at IS NOT NULL
      AND NOT EXISTS (
          SELECT 1 FROM jobs WHERE key_fingerprint = NEW.key_fingerprint AND status = 'pending'
      )
      AND NOT EXISTS (
          SELECT 1 FROM reservations
          WHERE key_fingerprint = NEW.key_fingerprint OR key_fingerprint IS NULL
      );
END;
