"""The bot's own work on media files (no network, no Discord): frames and joins of videos."""
