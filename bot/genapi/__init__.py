"""Client for the Generation Service API v1 (``docs/genapi.md``)."""
