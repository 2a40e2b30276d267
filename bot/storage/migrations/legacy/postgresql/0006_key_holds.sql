-- 0006: a key stays while anything made with it is live (SQLite's 0011).
--
-- A reservation is a request in flight: its POST may be charged and its task stored a moment
-- later with the key's fingerprint, so replacing or removing a guild's key keeps it while a
-- reservation on it lives, as a pending job on it does. NULL: made before this version (holds
-- every key of its guild until it expires, within minutes).
ALTER TABLE reservations ADD COLUMN key_fingerprint text;

-- The bot's default key (GENAPI_API_KEY), encrypted with KEY_ENCRYPTION_KEY: the one each
-- process started with (retired_at NULL) and the previous ones while something uses them.
CREATE TABLE default_keys (
    fingerprint text PRIMARY KEY,
    ciphertext  bytea NOT NULL,
    stored_at   double precision NOT NULL,
    retired_at  double precision
);

-- Pending jobs per key, whatever their guild: the default key's jobs span guilds.
CREATE INDEX jobs_pending_fingerprint ON jobs (key_fingerprint) WHERE status = 'pending';

-- 0001's trigger function, now also waiting for the key's reservations and releasing default
-- keys.
CREATE OR REPLACE FUNCTION retired_key_released() RETURNS trigger LANGUAGE plpgsql AS $$
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
    RETURN NULL;
END;
$$;
