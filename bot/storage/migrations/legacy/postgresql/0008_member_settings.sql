-- 0008: members' own defaults (/settings), keyed by user id (SQLite 0013).
--
-- A member without a row has set nothing. NULL: no default (the command's own applies).
-- The flags are 0 or 1, as in SQLite, so copy-db moves rows unchanged.
CREATE TABLE member_settings (
    user_id        bigint PRIMARY KEY,
    text_model     text,
    image_model    text,
    video_model    text,
    aspect_ratio   text,
    video_duration double precision CHECK (video_duration IS NULL OR video_duration > 0),
    prompt_suffix  text,
    private        integer NOT NULL DEFAULT 0,
    remix          integer NOT NULL DEFAULT 0,
    notify_dm      integer NOT NULL DEFAULT 0,
    updated_at     double precision NOT NULL
);
