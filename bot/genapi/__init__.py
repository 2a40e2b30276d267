"""Client for the Generation Service API v1 (``shared/generation-api-v1.md``)."""
